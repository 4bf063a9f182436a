"""Stacks pasted with a log: ``py-spy dump``'s of the processes of a hung job (the first advice on
any hang) and Python's ``faulthandler`` dumps (a rank's own, on a signal or a timeout, in its
labelled output). Each says where a process stood when it was taken: the ranks that wait stand at
the same frames, the one they wait for elsewhere (:func:`~distmon.forensics.suspects.suspects`
reads them so).

A stack is a rank's where its lines are labelled (torchrun's ``[rankN]:``, or a file named for its
rank: :mod:`~distmon.forensics.inputs`); a py-spy dump's own header names a process (``Process PID:
COMMAND``), not a rank, and the command of a rank torchrun started names none: such a stack is kept
apart, by its pid. Paths are kept as written
(py-spy shortens them to their ``sys.path`` entry: ``torch/distributed/distributed_c10d.py``);
no file named in a log is read."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from distmon.monitor.state.kinds import Doing
from distmon.monitor.state.whereabouts import Place, classify, is_library
from distmon.monitor.state.words import where
from distmon.node.faultstacks import FRAME_LINE, MAX_FRAMES, MAX_LINE, MAX_THREADS, STACK_HEAD, THREAD_HEAD
from distmon.wire import StackFrame

PY_SPY = "py-spy"
FAULTHANDLER = "faulthandler"
MAX_KEPT = 1_000_000
"""Frames read into the dumps of one log, whatever its size (a frame costs more than its line): the
frames past it are not kept."""
MAX_CHILDREN = 64
"""Dumps kept of a rank's child processes (its DataLoader workers)."""
MAX_UNPLACED = 256
"""Dumps kept that no label places: more is no paste of one job's processes."""
MAX_SAID = 3
"""Of those, how many are said in words."""
IDLE_CHILD = frozenset({Doing.LOCK, Doing.SLEEPING})
"""Where a child process waits for work (a DataLoader worker on its index queue)."""
WAITS = frozenset({Doing.COLLECTIVE, Doing.P2P, Doing.INIT, Doing.CUDA})
"""Where a stack stands waiting for other ranks (on a GPU a collective returns at once: its waiters
block later, at a CUDA sync)."""

_PROCESS = re.compile(r"Process (\d{1,10}): (.{0,300})")
_LOCAL_RANK = re.compile(r"--local[-_]rank[= ](\d{1,6})\b")
"""torch.distributed.launch's argument to each process it starts (torchrun's go in the environment)."""
_THREAD = re.compile(r'Thread (0x[0-9A-Fa-f]{1,16}|\d{1,10}) \(([a-z+]{1,20})\)(?:: "(.{0,200})")?')
"""A thread py-spy lists, by its id, whether it ran, and its name where Python gave it one."""
_FRAME = re.compile(r" {2,6}(\S.{0,300}?) \(([^()]{1,1000}?)(?::(\d{1,9}))?\)")
_HEADED = re.compile(r"[#=*>\- ]{0,10}(?:[Rr]ank|RANK) ?[=:#]? ?(\d{1,6})[ :=*#<\-]{0,10}")
"""A line a person put above a rank's dump in a paste (``Rank 3:``, ``=== rank 3 ===``)."""
_DEEPER = re.compile(r" {7,}\S")
"""py-spy's ``--locals`` lines, deeper than its frames: inside a frame, not the end of the thread."""


@dataclass
class Pasted:
    """One process's dump: how it was taken, its pid where the dump says it, its main thread's
    frames (innermost last)."""

    how: str
    pid: int | None = None
    frames: list[StackFrame] = field(default_factory=list)
    gil: bool = False
    """py-spy saw the main thread hold the GIL."""
    local: int | None = None
    """The local rank its command names (``--local_rank=3``)."""
    children: list[Pasted] = field(default_factory=list)
    """Its child processes' dumps, after its own under its rank (``py-spy dump --subprocesses``: its
    DataLoader workers)."""

    def place(self) -> Place:
        """Where it stood, the user's innermost frame the one their own code (py-spy prints the paths
        of the standard library and the packages installed shortened, ``threading.py``, as a script's)."""
        place = classify(self.frames, self.gil)
        user = next((f for f in reversed(self.frames) if not is_library(f) and not _library(f.file)), None)
        return Place(place.kind, place.words, user)

    def words(self) -> str:
        """``stood in a collective (all_reduce) (your code: train.py:30 in step)``, and where those of its
        children stood that were doing something (a DataLoader worker waiting for work is not)."""
        place = self.place()
        said = f"stood {place.words}" + (f" (your code: {where(place.user)})" if place.user is not None else "")
        busy = [c for c in self.children if c.place().kind not in IDLE_CHILD]
        return said + "".join(f"; its child {c.whose()} {c.words()}" for c in busy[:MAX_SAID])

    def to_json(self, rank: int | None) -> dict[str, Any]:
        place = self.place()
        return {
            "rank": rank,
            "pid": self.pid,
            "local_rank": self.local,
            "how": self.how,
            "stood": place.words,
            "your_code": where(place.user) if place.user is not None else None,
            "frames": [{"file": f.file, "line": f.line, "func": f.func} for f in self.frames],
            "children": [c.to_json(None) for c in self.children],
        }

    def whose(self) -> str:
        """``pid 4242 (--local_rank 3)``."""
        who = f"pid {self.pid}" if self.pid is not None else "a process"
        return who + (f" (--local_rank {self.local})" if self.local is not None else "")


LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "numpy", "transformers", "accelerate", "deepspeed", "lightning",
    "pytorch_lightning", "lightning_fabric", "datasets", "safetensors", "triton", "apex", "ray", "horovod", "vllm",
    "peft", "trl", "tqdm", "fsspec", "huggingface_hub", "megatron",
})  # fmt: skip
"""Installed packages a training job's stack passes through, by the name py-spy's shortened paths start with."""


def _library(path: str) -> bool:
    """A path py-spy shortened to the standard library's or an installed package's directory
    (``multiprocessing/queues.py``, ``torch/distributed/distributed_c10d.py``)."""
    top = path.split("/", 1)[0].removesuffix(".py")
    return not path.startswith(("/", ".")) and (top in sys.stdlib_module_names or top in LIBRARIES)


@dataclass
class _Thread:
    name: str
    current: bool = False
    gil: bool = False
    frames: list[StackFrame] = field(default_factory=list)
    """Innermost first, as the dumps print them."""


@dataclass
class _Dump:
    how: str
    pid: int | None = None
    local: int | None = None
    threads: list[_Thread] = field(default_factory=list)
    open: bool = True
    """A frame line now continues its last thread."""
    rank: int | None = None
    """The rank a person's line above the dump names, where no label places its lines."""
    crash: bool = False
    """faulthandler's dump of a fatal error (``Fatal Python error: Segmentation fault``): where the
    process crashed, read as its crash (:mod:`~distmon.forensics.crashes`), not where it stood."""

    def main(self) -> Pasted | None:
        """The main thread's stack: py-spy names it ``MainThread`` (else lists it first); faulthandler
        names none: the one whose outermost frame is the script's ``<module>``, else the current one."""
        if self.how == PY_SPY:
            main = next((t for t in self.threads if t.name == "MainThread"), self.threads[0] if self.threads else None)
        else:
            started = [t for t in self.threads if t.frames and t.frames[-1].func == "<module>"]
            main = started[0] if started else next((t for t in self.threads if t.current), None)
        if main is None or not main.frames:
            return None
        return Pasted(self.how, self.pid, main.frames[::-1], main.gil, self.local)


@dataclass
class PastedStacks:
    """The dumps a log holds: by rank where its lines are labelled, else apart, by pid."""

    ranked: dict[int, Pasted] = field(default_factory=dict)
    unplaced: list[Pasted] = field(default_factory=list)
    _open: dict[int | None, _Dump] = field(default_factory=dict)
    _kept: int = 0
    """Frames read so far (:data:`MAX_KEPT` at most)."""
    _headed: int | None = None
    """The rank the last line that was no dump's named, alone on it (``Rank 3:``), in unlabelled lines."""

    def line(self, body: str, rank: int | None) -> bool:
        """One line, its label taken off (``rank`` None: none); whether it was a dump's."""
        if len(body) > MAX_LINE:
            return False
        text = body.rstrip()
        read = self._read(text, rank)
        if rank is None and not read and text:
            headed = _HEADED.fullmatch(text) if len(text) < 40 and "ank" in text.lower() else None
            self._headed = int(headed.group(1)) if headed else None
            if headed:
                self._close(None)  # a paste's next rank: the dump before it has ended
        return read

    def _read(self, text: str, rank: int | None) -> bool:
        dump = self._open.get(rank)
        if text.startswith("Process ") and (process := _PROCESS.fullmatch(text)) is not None:
            local = _LOCAL_RANK.search(process.group(2))
            self._start(rank, PY_SPY, int(process.group(1)), int(local.group(1)) if local else None)
            return True
        if text.startswith("Fatal Python error"):
            self._start(rank, FAULTHANDLER).crash = True
            return False
        if text.startswith(("Thread ", "Current thread ", STACK_HEAD)):
            return self._thread(rank, text)
        return dump is not None and dump.open and bool(dump.threads) and self._frame(dump, text)

    def _start(self, rank: int | None, how: str, pid: int | None = None, local: int | None = None) -> _Dump:
        """A new dump of the lines of ``rank``, the one before it ended; unlabelled, of the rank a line above named."""
        self._close(rank)
        dump = self._open[rank] = _Dump(how, pid, local, rank=self._headed if rank is None else None)
        if rank is None:
            self._headed = None
        return dump

    def unnamed(self) -> list[str]:
        """Where the processes whose stacks no label places stood, in words: the fewer that stood apart
        from the others, which wait (:data:`WAITS`), alone."""
        waiting = [p for p in self.unplaced if p.place().kind in WAITS]
        apart = [p for p in self.unplaced if p.place().kind not in WAITS]
        told = apart if waiting and apart and len(apart) <= len(waiting) else self.unplaced
        if not told:
            return []
        more = len(told) - MAX_SAID
        shown = "; ".join(f"{p.whose()} {p.words()}" for p in told[:MAX_SAID]) + (
            f"; and {more} more" if more > 0 else ""
        )
        many = "the other" if len(waiting) == 1 else f"{len(waiting)} others"
        others = f", where {many} stood {waiting[0].place().words}" if told is apart else ""
        return [f"stacks the log places on no rank: {shown}{others}"]

    def to_json(self) -> list[dict[str, Any]]:
        """Each dump, the ranks' in order, then those no label places."""
        return [p.to_json(r) for r, p in sorted(self.ranked.items())] + [p.to_json(None) for p in self.unplaced]

    def finish(self, ranks_of: dict[int, int]) -> None:
        """The dumps still open closed; those no label placed, of a process a launcher names the rank of
        by its pid (torchrun's failure table: ``rank : 1``, ``exitcode : -6 (pid: 4243)``), placed so."""
        for rank in list(self._open):
            self._close(rank)
        for pasted in list(self.unplaced):
            rank = ranks_of.get(pasted.pid) if pasted.pid is not None else None
            if rank is not None and rank not in self.ranked:
                self.ranked[rank] = pasted
                self.unplaced.remove(pasted)

    def _thread(self, rank: int | None, text: str) -> bool:
        spy = _THREAD.fullmatch(text)
        fault = THREAD_HEAD.fullmatch(text) if spy is None else None
        if spy is None and fault is None and text != STACK_HEAD:
            return False
        how = PY_SPY if spy is not None else FAULTHANDLER
        dump = self._open.get(rank)
        current = spy is None and (fault is None or fault.group(1) != "Thread")
        # a dump has one current thread: another is the next dump (several processes' lines, unlabelled)
        if dump is None or dump.how != how or (current and any(t.current for t in dump.threads)):
            dump = self._start(rank, how)
        if len(dump.threads) == MAX_THREADS:
            dump.open = False
            return True
        named = (spy.group(3) or "") if spy else ""
        dump.threads.append(_Thread(named, current=current, gil=spy is not None and "gil" in spy.group(2)))
        dump.open = True
        return True

    def _frame(self, dump: _Dump, text: str) -> bool:
        thread = dump.threads[-1]
        # a label's space taken off may leave faulthandler's two-space indent one space short
        found = FRAME_LINE.fullmatch("  " + text.lstrip()) if dump.how == FAULTHANDLER else _FRAME.fullmatch(text)
        if found is None:
            dump.open = dump.how == PY_SPY and _DEEPER.match(text) is not None
            return dump.open
        if len(thread.frames) < MAX_FRAMES and self._kept < MAX_KEPT:
            self._kept += 1
            if dump.how == FAULTHANDLER:
                file, line, func = found.groups()
            else:
                func, file, line = found.groups()
            thread.frames.append(StackFrame(file=file, line=int(line) if line and line.isdigit() else 0, func=func))
        return True

    def _close(self, rank: int | None) -> None:
        dump = self._open.pop(rank, None)
        pasted = dump.main() if dump is not None and not dump.crash else None
        if pasted is None:
            return
        rank = dump.rank if dump is not None and dump.rank is not None else rank
        held = self.ranked.get(rank) if rank is not None else None
        if rank is not None and (held is None or held.pid == pasted.pid):
            self.ranked[rank] = pasted  # a later dump of the rank's process: where it stood last
        elif held is not None and len(held.children) < MAX_CHILDREN:
            held.children.append(pasted)  # py-spy's --subprocesses: the rank's process first, then its children
        elif rank is None and len(self.unplaced) < MAX_UNPLACED:
            self.unplaced.append(pasted)
