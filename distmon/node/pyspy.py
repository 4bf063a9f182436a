"""Stacks from outside a process, with py-spy: for a process that cannot say where it is.

A rank whose own threads are starved (a native call holding the GIL) cannot sample itself,
and a DataLoader worker is another process. ``py-spy dump`` reads either from outside,
Python and native frames, without stopping it for more than a moment.

Who may trace whom: root, or a process with CAP_SYS_PTRACE, may trace anything; under Yama
``ptrace_scope`` 1 (Ubuntu's default) a process may trace only its descendants (a rank its
DataLoader workers), or a process that named it with ``PR_SET_PTRACER``
(:func:`allow_tracer`); 2 and 3 allow only CAP_SYS_PTRACE, or nothing.

:class:`StackTaker` runs py-spy on a thread of its own, once per (pid, stall), each run
bounded in time, so neither the training thread nor a monitor's intake ever waits for it.

Where py-spy cannot take a stack (refused, absent, failed), :func:`dump` asks the rank's own
faulthandler for it (:mod:`distmon.node.faultstacks`): Python frames only, and it says so and why.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import linecache
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from distmon.node import faultstacks
from distmon.wire import StackFrame

TIMEOUT = 5.0
"""Seconds a py-spy run may take before it is killed."""
MAX_FRAMES = 40
KEPT = 64
"""Results remembered; older ones are forgotten (one per stall is all that is asked for)."""
YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")
PR_SET_PTRACER = 0x59616D61
PY_SPY = "py-spy"
FAULTHANDLER = "faulthandler"
TRACER_ENV = "DISTMON_TRACER_PID"
"""Set by ``distmon run`` to its monitor's pid: each rank lets that monitor (and the py-spy it
starts) trace it, which Yama ``ptrace_scope`` 1 forbids a sibling by default."""


@dataclass(frozen=True)
class OutsideStack:
    """The training thread's stack (the main thread's unless told which), innermost last, or
    why it could not be taken."""

    frames: list[StackFrame] | None = None
    error: str | None = None
    owns_gil: bool = False
    partial: str | None = None
    """Why the native frames are missing from ``frames``, where they are."""
    how: str = PY_SPY
    """How it was taken: :data:`PY_SPY` (ptrace: Python and native frames) or
    :data:`FAULTHANDLER` (the rank's own handler, on a signal: Python frames only)."""


CANNOT_SUSPEND = "py-spy cannot suspend a stopped process (State: T) to unwind its native frames"


def executable() -> str | None:
    """py-spy from PATH, or from this interpreter's own scripts (a venv not activated)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def dump(
    pid: int, timeout: float = TIMEOUT, stopped: bool = False, tid: int | None = None, thread: int | None = None
) -> OutsideStack:
    """The thread ``tid`` of ``pid`` (its native id, ``thread`` its ``threading.get_ident()``;
    the main thread when None or not found),
    Python and native frames; falls back to Python frames
    alone where native unwinding fails, and says why. A ``stopped`` process (SIGSTOP) cannot
    be suspended to unwind: its Python frames are read as it stands. Where py-spy takes
    nothing (refused, absent, failed), a running process's Python frames are asked of its
    faulthandler (a stopped one would answer only once continued). Never raises."""
    taken = _py_spy(pid, timeout, stopped, tid)
    if taken.frames is not None or stopped:
        return taken
    return from_faulthandler(pid, taken.error or "py-spy found no thread", thread)


def from_faulthandler(pid: int, refused: str, thread: int | None = None) -> OutsideStack:
    """Thread ``thread`` (its ``threading.get_ident()``; default the main thread) of ``pid``,
    from the faulthandler its hook armed, saying why py-spy did not take it (``refused``);
    ``refused`` alone where it armed none, with faulthandler's error where that failed too.
    Never raises."""
    stacks = faultstacks.take_fault_stacks(pid)
    if not stacks.armed:
        return OutsideStack(error=refused)
    chosen = stacks.choose(thread)
    if chosen is None or not chosen.frames:
        why = stacks.error or ("it listed no Python frame for that thread" if chosen else "it listed no thread")
        return OutsideStack(error=f"{refused}; nor with faulthandler: {why}")
    return OutsideStack(
        frames=chosen.frames[-MAX_FRAMES:], how=FAULTHANDLER, partial=f"py-spy did not take it: {refused}"
    )


def _py_spy(pid: int, timeout: float, stopped: bool, tid: int | None) -> OutsideStack:
    exe = executable()
    if exe is None:
        return OutsideStack(error="py-spy is not installed (pip install '.[stacks]' in distmon's checkout)")
    python_only = [exe, "dump", "--pid", str(pid), "--json", "--full-filenames"]
    if stopped:
        result = _run([*python_only, "--nonblocking"], timeout, tid)
        return replace(result, partial=CANNOT_SUSPEND) if result.frames is not None else result
    result = _run([*python_only, "--native"], timeout, tid)
    if result.error and "permission" not in result.error:
        # native unwinding reads every library's symbols (seconds on a loaded host, with
        # torch's): the Python frames alone still say where the rank is
        why = result.error
        result = _run(python_only, timeout, tid)
        if result.frames is not None:
            result = replace(result, partial=f"native unwinding failed ({why})")
    return result if result.frames is not None or result.error else OutsideStack(error="py-spy found no thread")


def _run(command: list[str], timeout: float, tid: int | None = None) -> OutsideStack:
    pid = int(command[command.index("--pid") + 1])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return OutsideStack(error=f"py-spy did not answer within {timeout:.0f}s")
    except OSError as e:
        return OutsideStack(error=f"cannot run py-spy: {e.strerror}")
    if done.returncode != 0:
        return OutsideStack(error=_explain(done.stderr, pid))
    try:
        threads = json.loads(done.stdout)
    except ValueError:
        return OutsideStack(error="py-spy's output was not JSON")
    by_id = {t.get("os_thread_id"): t for t in threads}
    main = by_id.get(tid) or by_id.get(pid) or (threads[0] if threads else None)
    if main is None:
        return OutsideStack()
    frames = [_frame(f) for f in main.get("frames", [])[:MAX_FRAMES]]
    frames.reverse()
    return OutsideStack(frames=frames, owns_gil=bool(main.get("owns_gil")))


@dataclass(frozen=True)
class Sampled:
    """One thread's Python stack as py-spy read it without stopping its process: the frames,
    innermost last, and each frame's arguments as py-spy shows them (their ``repr``)."""

    frames: list[StackFrame]
    args: list[dict[str, str]]
    owns_gil: bool = False


MAX_ARGS = 16
"""Arguments of one frame kept, at most."""


def sample(pid: int, timeout: float = TIMEOUT) -> dict[int, Sampled] | str:
    """Every thread of ``pid`` by its native id, Python frames and their arguments, read
    without suspending the process (``--nonblocking``: it pays nothing; a stack read while the
    thread runs may be torn, one that stands still never is); or why it could not be."""
    exe = executable()
    if exe is None:
        return "py-spy is not installed (pip install '.[stacks]' in distmon's checkout)"
    command = [exe, "dump", "--pid", str(pid), "--json", "--full-filenames", "--nonblocking", "--locals"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"py-spy did not answer within {timeout:.0f}s"
    except OSError as e:
        return f"cannot run py-spy: {e.strerror}"
    if done.returncode != 0:
        return _explain(done.stderr, pid)
    try:
        threads = json.loads(done.stdout)
        return {int(t["os_thread_id"]): _sampled(t) for t in threads if isinstance(t, dict)}
    except (ValueError, TypeError, KeyError):
        return "py-spy's output was not what it should be"


def _sampled(thread: dict[str, Any]) -> Sampled:
    raw = thread.get("frames", [])[:MAX_FRAMES]
    frames = [_frame(f) for f in raw]
    args = [
        {str(a.get("name")): str(a.get("repr"))[:200] for a in (f.get("locals") or [])[:MAX_ARGS] if a.get("arg")}
        for f in raw
    ]
    frames.reverse()
    args.reverse()
    return Sampled(frames, args, bool(thread.get("owns_gil")))


def _frame(f: dict[str, Any]) -> StackFrame:
    file, line = str(f.get("filename", "?")), int(f.get("line") or 0)
    code = None
    if file.endswith(".py") and line:
        code = linecache.getline(file, line).strip() or None
    # py-spy names a method by its qualified name (Class.method); a rank names its frames by
    # their code object's name, as tracebacks do: one name for one frame, whoever took the stack
    func = str(f.get("name", "?"))
    if file.endswith(".py") or file.startswith("<frozen"):
        func = func.rsplit(".", 1)[-1] or "?"
    return StackFrame(file=file, line=line, func=func, code=code)


def _explain(stderr: str, pid: int) -> str:
    """py-spy's error in one line, with what to do when it is a permission problem."""
    message = next((line.strip() for line in stderr.splitlines() if line.strip()), "py-spy failed")
    if "ermission" not in stderr and "not permitted" not in stderr:
        return f"py-spy failed: {message[:200]}"
    scope = yama_scope()
    why = {
        1: "Yama ptrace_scope is 1: only an ancestor of the process, or root, may trace it",
        2: "Yama ptrace_scope is 2: only a process with CAP_SYS_PTRACE may trace it",
        3: "Yama ptrace_scope is 3: no process may be traced",
    }.get(scope or 0, "this user may not trace it (a container needs CAP_SYS_PTRACE)")
    return f"permission denied tracing pid {pid}: {why}; run the monitor as root, or `docker run --cap-add SYS_PTRACE`"


def yama_scope() -> int | None:
    """Yama's ``ptrace_scope``, None where Yama is absent (any process of the same user may trace)."""
    with contextlib.suppress(OSError, ValueError):
        return int(YAMA.read_text())
    return None


def allow_tracer(pid: int) -> bool:
    """Let ``pid`` and its descendants trace this process under Yama ``ptrace_scope`` 1
    (``PR_SET_PTRACER``); False where there is no Yama or it refuses."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(pid), 0, 0, 0) == 0)
    return False


class StackTaker:
    """Takes stacks with py-spy on a thread of its own, started on the first request.

    ``request(pid, stall)`` returns the result once there is one, ``None`` while it is being
    taken (of thread ``tid``, by its native id, ``thread`` by its ident, where given); a new ``stall`` (its start
    time, say) for the same pid asks for a fresh one. With ``take`` False it only returns what
    was taken before (for a process since gone).
    """

    def __init__(self, timeout: float = TIMEOUT) -> None:
        self._timeout = timeout
        self._results: OrderedDict[tuple[int, float], OutsideStack | None] = OrderedDict()
        self._lock = threading.Lock()
        self._todo: queue.SimpleQueue[tuple[tuple[int, float], bool, int | None, int | None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()

    def request(
        self,
        pid: int,
        stall: float,
        take: bool = True,
        stopped: bool = False,
        tid: int | None = None,
        thread: int | None = None,
    ) -> OutsideStack | None:
        key = (pid, stall)
        with self._lock:
            if key in self._results or not take:
                return self._results.get(key)
            self._results[key] = None
            while len(self._results) > KEPT:
                self._results.popitem(last=False)
            if self._thread is None or self._owner != os.getpid():
                self._owner = os.getpid()
                self._thread = threading.Thread(target=self._work, name="distmon-py-spy", daemon=True)
                self._thread.start()
        self._todo.put((key, stopped, tid, thread))
        return None

    def _work(self) -> None:
        while True:
            key, stopped, tid, thread = self._todo.get()
            result = dump(key[0], self._timeout, stopped, tid, thread)
            with self._lock:
                if key in self._results:
                    self._results[key] = result
