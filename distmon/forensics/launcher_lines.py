"""What launchers print of the workers they started and how each ended: torchrun's failure
table and its agent's lines, Open MPI's ``mpirun`` and its signal handler, Slurm's ``srun``.

A launcher says who ended and how (an exit code, a signal, an exception when torchrun's table
holds the traceback), never why; and it names the first failure it *observed*, which is the
first cause only where nothing timed out first. Shapes read::

    torchrun  [1]: / time : 2023-05-19_16:39:58 / host : n1 / rank : 1 (local_rank: 1) /
              exitcode : 1 (pid: 78971) / traceback : Signal 9 (SIGKILL) received by PID 78971
              (every entry of its ``Failures:``, and its ``Root Cause (first observed failure):``)
              failed (exitcode: -9) local_rank: 3 (pid: 407727) of binary: /usr/bin/python
    mpirun    mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed).
              The first process to do so was: / Process name: [[29973,1],0] / Exit code: 1
              [host:02773] Signal: Segmentation fault (11)       (Open MPI's handler, by pid)
    srun      srun: error: node-1: tasks 8-13,15: Exited with exit code 1
              srun: error: node-1: task 3: Killed
    mp.spawn  torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL
              Exception: process 3 terminated with exit code 1          (torch 1.x's wording)
    deepspeed [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=7',
              ...] exits with return code = -9

A local rank (torchrun's agent line) is the rank on its node, a task (srun) the rank only where
srun started one task a rank, a process of ``mp.spawn`` its index, the rank on one node: they are
said, not taken for global ranks. The deepspeed launcher says a worker's return code, not whose:
the command its line prints is the last one it built, whichever worker failed.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass

from distmon.forensics.tracebacks import ISO, MAX_TRACEBACK_LINES, TRACEBACK, Raised, Traceback, utc
from distmon.guards.text import visible

SIGABRT = -6
"""torchrun's exit code of a rank its own watchdog aborted: a timeout's consequence, not a cause."""
SIGTERM = -15
"""torchrun's exit code of a rank it tore down after another failed."""
TEARDOWN = frozenset({SIGABRT, SIGTERM})
RANK = "rank"
LOCAL_RANK = "local rank"
TASK = "task"
PROCESS = "process"
SPAWNED = "spawned process"
WORKER = "worker"
"""What a launcher's number counts: a global rank, a rank on its node, an srun task, a pid, the
index ``mp.spawn`` gave a process, or nothing (a worker the launcher does not name)."""
ON_A_NODE = (LOCAL_RANK, TASK, SPAWNED)
"""Units that are the rank where the job ran on one node (a task: where srun started one a rank)."""
MAX_TASKS = 1 << 17
"""Tasks srun's lines in one log may name: more is no real job's."""

ROOT_CAUSE = "Root Cause (first observed failure):"
_FAILURES = "Failures:"
_TABLE_FIELD = re.compile(r"\s{0,8}(time|host|rank|exitcode|error_file|traceback)\s{0,8}: ?(.*)")
_ENTRY = re.compile(r"\s{0,8}\[\d{1,9}\]:\s*$")
_SEPARATOR = re.compile(r"\s*(?:={20,}|-{20,})\s*$")
_SIGNAL = re.compile(r"Signal (\d{1,3}) \((SIG\w{1,10})\)")
_AGENT = re.compile(r"failed \(exitcode: (-?\d{1,9})\) local_rank: (\d{1,9}) \(pid: \d{1,9}\)")
_NOTICED = re.compile(
    r"noticed that process rank (\d{1,9}) with PID \S{1,20} on node (\S{1,200}?) exited on signal (\d{1,3})"
    r"(?: \(([\w ]{1,40})\))?"
)
_FIRST_PROCESS = "The first process to do so was"
_PROCESS_NAME = re.compile(r"Process name:\s*\[\[\d{1,12},\d{1,12}\],(\d{1,9})\]")
_EXIT_CODE = re.compile(r"^\s*Exit code:\s*(-?\d{1,9})")
_HANDLER = re.compile(r"^\[([\w.-]{1,200}):(\d{1,12})\] Signal: ([\w ()-]{1,60}?) \((\d{1,3})\)")
_SRUN = re.compile(
    r"srun: error: ([\w.-]{1,200}): tasks? ([\d,-]{1,4000}): "
    r"(Exited with exit code (\d{1,3})|Killed|Out Of Memory|Terminated|Aborted|Segmentation fault)"
)
_SPAWN_EXIT = re.compile(
    r"(?:ProcessExitedException|^Exception): process (\d{1,9}) terminated with "
    r"(?:signal (SIG[A-Z]{1,10})|exit code (-?\d{1,9}))"
)
_DEEPSPEED = re.compile(r"\] exits with return code = (-?\d{1,9})\s*$")
_SRUN_SIGNALS = {"Killed": 9, "Out Of Memory": 9, "Terminated": 15, "Aborted": 6, "Segmentation fault": 11}
_SIGNAL_NAMES = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS"}


@dataclass
class WorkerExit:
    """How a launcher says one of its workers ended."""

    unit: str
    """What :attr:`who` counts: :data:`RANK`, :data:`LOCAL_RANK`, :data:`TASK` or :data:`PROCESS`."""
    who: int
    code: int | None
    """The exit code; negative where a signal ended it (its number)."""
    by: str
    """The launcher that said so."""
    at: float | None = None
    host: str | None = None
    first: bool = False
    """The launcher's first observed failure (torchrun's root cause, mpirun's first process)."""
    signal: str | None = None
    raised: Raised | None = None
    """The exception, where torchrun's table holds its traceback."""

    @property
    def how(self) -> str:
        """``exit code 1``, ``signal 9 (SIGKILL)``."""
        if self.code is None or self.code >= 0:
            return f"exit code {self.code}"
        name = self.signal or _SIGNAL_NAMES.get(-self.code)
        return f"signal {-self.code}" + (f" ({name})" if name else "")

    @property
    def killed(self) -> bool:
        """Ended by a signal that is not the launcher's own teardown nor a watchdog's abort."""
        return self.code is not None and self.code < 0 and self.code not in TEARDOWN

    def failure(self, timed_out: bool) -> Raised | None:
        """The exit as the rank's last words: the exception the table holds, or the signal that
        killed it, or its exit code. None for a rank its own watchdog aborted or the launcher
        tore down, or one that timed out like its peers and left only an exit code: the
        launcher observed it first, no more."""
        if self.raised is not None:
            return self.raised
        if timed_out or self.code is None or self.code == 0 or self.code in TEARDOWN:
            return None
        said = f"killed: {self.by}'s first observed failure" if self.first else f"killed, as {self.by} says"
        if self.code < 0:
            kind = f"Signal {-self.code} ({self.signal or _SIGNAL_NAMES.get(-self.code, '?')})"
            return Raised(kind, said, [], self.at, launcher=self.by)
        said = f"exit code {self.code}, {self.by}'s first observed failure (its traceback not in the log)"
        return Raised("Exception", said, [], self.at, launcher=self.by)


@dataclass
class LauncherLines:
    """Reads a launcher's lines as they come, handing each exit to :attr:`kept` once whole (a
    table entry once the next starts, a separator or another line follows, or :meth:`flush`)."""

    kept: Callable[[WorkerExit], None]
    entry: WorkerExit | None = None
    root: bool = False
    """The entry being read is the table's root cause."""
    traceback: Traceback | None = None
    lines: int = 0
    """Lines of the entry's traceback read."""
    first_process: WorkerExit | None = None
    """mpirun's "The first process to do so was": its name, then its exit code, follow."""
    tasks: int = 0
    """srun's tasks read, within :data:`MAX_TASKS`: a line may name a range of any size, and the
    next line another."""

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is a launcher's; False for any other line."""
        if self._table(body):
            return True
        self.flush()
        return (
            self._agent(body) or self._mpirun(body) or self._srun(body) or self._spawned(body) or self._deepspeed(body)
        )

    def flush(self) -> None:
        """Keeps the table entry being read, as it stands (the table or the log ended)."""
        entry, self.entry, self.traceback = self.entry, None, None
        if entry is not None and entry.code is not None and entry.who >= 0:
            self.kept(entry)

    def _table(self, body: str) -> bool:
        stripped = body.strip()
        if stripped in (ROOT_CAUSE, _FAILURES) or _ENTRY.match(body) or _SEPARATOR.match(body):
            self.flush()
            if stripped == ROOT_CAUSE:
                self.root = True
            elif not _ENTRY.match(body):
                self.root = False
            return True
        if self.traceback is not None and self.entry is not None and self.lines < MAX_TRACEBACK_LINES:
            self.lines += 1
            if self.entry.raised is None:
                self.entry.raised = self.traceback.line(body[2:] if body.startswith("  ") else body, self.entry.at)
            return True
        found = _TABLE_FIELD.match(body)
        if found is None:
            return False
        key, value = found.groups()
        if self.entry is None and not (key == "time" or "local_rank" in value):
            return False  # a line of the program's own, not of torchrun's table
        if self.entry is None:
            self.entry = WorkerExit(RANK, -1, None, "torchrun", first=self.root)
        self._field(self.entry, key, value)
        return True

    def _field(self, entry: WorkerExit, key: str, value: str) -> None:
        number = re.match(r"-?\d{1,9}", value)
        if key == "rank" and number:
            entry.who = int(number.group())
        elif key == "exitcode" and number:
            entry.code = int(number.group())
        elif key == "time" and (iso := ISO.match(value)):
            entry.at = utc(*iso.groups())
        elif key == "host":
            entry.host = visible(value.strip(), 200)
        elif key == "traceback":
            signal = _SIGNAL.search(value)
            if signal:
                entry.signal = signal.group(2)
            if value.startswith(TRACEBACK):
                self.traceback, self.lines = Traceback(), 0

    def _agent(self, body: str) -> bool:
        found = _AGENT.search(body) if "local_rank" in body else None
        if found is None:
            return False
        self.kept(WorkerExit(LOCAL_RANK, int(found.group(2)), int(found.group(1)), "torchrun", first=True))
        return True

    def _mpirun(self, body: str) -> bool:
        noticed = _NOTICED.search(body) if "noticed that process rank" in body else None
        if noticed:
            rank, host, signal, name = noticed.groups()
            self.kept(
                WorkerExit(RANK, int(rank), -int(signal), "mpirun", host=visible(host, 200), first=True, signal=name)
            )
            return True
        if _FIRST_PROCESS in body:
            self.first_process = WorkerExit(RANK, -1, None, "mpirun", first=True)
            return True
        pending = self.first_process
        if pending is not None and (named := _PROCESS_NAME.search(body)):
            pending.who = int(named.group(1))
            return True
        if pending is not None and pending.who >= 0 and (code := _EXIT_CODE.match(body)):
            pending.code, self.first_process = int(code.group(1)), None
            self.kept(pending)
            return True
        handler = _HANDLER.match(body) if "Signal:" in body else None
        if handler:
            host, pid, name, number = handler.groups()
            self.kept(WorkerExit(PROCESS, int(pid), -int(number), "Open MPI", host=host, signal=name.strip()))
            return True
        return False

    def _srun(self, body: str) -> bool:
        found = _SRUN.search(body) if "srun: error:" in body else None
        if found is None:
            return False
        host, tasks, how, code = found.groups()
        number = int(code) if code is not None else -_SRUN_SIGNALS[how]
        named = task_list(tasks, MAX_TASKS - self.tasks) if self.tasks < MAX_TASKS else []
        self.tasks += len(named)
        for task in named:
            self.kept(WorkerExit(TASK, task, number, "srun", host=visible(host, 200)))
        return True

    def _spawned(self, body: str) -> bool:
        """``mp.spawn``'s join: the first process it found ended, by a signal or an exit code."""
        found = _SPAWN_EXIT.search(body) if "terminated with" in body else None
        if found is None:
            return False
        index, name, code = found.groups()
        number = int(code) if code is not None else -_signal_number(name)
        by = "torch.multiprocessing.spawn"
        self.kept(WorkerExit(SPAWNED, int(index), number, by, first=True, signal=name))
        return True

    def _deepspeed(self, body: str) -> bool:
        """The deepspeed launcher's ``... exits with return code = -9``: a worker's, which one it
        does not say."""
        found = _DEEPSPEED.search(body) if "exits with return code" in body else None
        if found is None:
            return False
        self.kept(WorkerExit(WORKER, -1, int(found.group(1)), "the deepspeed launcher", first=True))
        return True


def _signal_number(name: str) -> int:
    """``SIGKILL`` as 9; 0 for a name this platform does not know."""
    try:
        return int(signal.Signals[name])
    except KeyError:
        return 0


def task_list(text: str, most: int = MAX_TASKS) -> list[int]:
    """``8-13,15`` as the tasks it names, within ``most`` (:data:`MAX_TASKS`)."""
    found: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            continue
        first, last = int(low), int(high or low)
        if first > last or last - first + len(found) >= most:
            continue
        found.extend(range(first, last + 1))
    return found
