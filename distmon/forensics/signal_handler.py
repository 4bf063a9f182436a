"""Open MPI's signal handler (``opal/util/stacktrace.c``) on a process that caught a fatal signal
(SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), by its pid, under mpirun's ``--tag-output`` label (the
rank) where it is on::

    [1,3]<stderr>:[n1:04711] *** Process received signal ***
    [1,3]<stderr>:[n1:04711] Signal: Segmentation fault (11)
    [1,3]<stderr>:[n1:04711] [ 0] /lib64/libpthread.so.0(+0xf6d0)[0x2aaaab2446d0]
    [1,3]<stderr>:[n1:04711] *** End of error message ***

A paste may cut the line naming the signal; the backtrace's first frames still say whether the
process aborted itself (a watchdog's abort follows another's failure: no crash of its own) or
crashed on its own. mpirun names one process, the first it saw end: where several crashed,
their handlers say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from distmon.forensics.worker_exits import MAX_TASKS, PROCESS, RANK, WorkerExit

_SIGNAL = re.compile(r"^\s{0,8}\[(?:([\w.-]{1,200}):)?(\d{1,12})\] Signal: ([\w ()-]{1,60}?) \((\d{1,3})\)")
_FRAME = re.compile(r"^\s{0,8}\[(?:[\w.-]{1,200}:)?\d{1,12}\] \[ ?(\d{1,3})\] (.{0,300})")
_REPORT = re.compile(r"^\s{0,8}\[(?:[\w.-]{1,200}:)?\d{1,12}\] \*\*\* (?:Process received signal|End of error message)")
"""The lines that open and close the handler's report (a paste may take its closing stars for Markdown's)."""
_ABORT = re.compile(r"abort|raise|gsignal|pthread_kill|terminate|__cxa")
"""Frames of a process aborting itself."""
FIRST_FRAMES = 3
"""Frames that show an abort (the handler's own, libc's ``raise``, ``abort``)."""
BY = "Open MPI's signal handler"
CRASHED = "a crash (Open MPI's signal handler; the log cuts its line saying which signal)"


@dataclass
class SignalHandler:
    """Reads the handler's lines, handing each process's crash to :attr:`kept` as an exit."""

    kept: Callable[[WorkerExit], None]
    crashed: set[int] = field(default_factory=set)
    """The ranks whose crash was handed on (or seen to be an abort), :data:`MAX_TASKS` at most."""
    reported: set[int] = field(default_factory=set)
    """The ranks the handler reported on (any line of its report), :data:`MAX_TASKS` at most: each ended by a
    signal, whether its report says which or not."""
    aborted: set[int] = field(default_factory=set)
    """The ranks whose backtrace shows them aborting (a watchdog's abort, after another's failure)."""
    backtraces: dict[int, list[str]] = field(default_factory=dict)
    """The first frames of each rank's backtrace whose line naming the signal was not read."""

    def line(self, body: str, rank: int | None) -> bool:
        """Reads ``body`` (``rank``: its label's) if it names a signal, or is a frame under a rank's label."""
        handler = _SIGNAL.match(body) if "Signal:" in body else None
        if handler is not None:
            host, pid, name, number = handler.groups()
            if rank is None:
                self.kept(WorkerExit(PROCESS, int(pid), -int(number), "Open MPI", host=host, signal=name.strip()))
            else:
                if len(self.crashed) < MAX_TASKS:
                    self.crashed.add(rank)
                    self.reported.add(rank)
                self.kept(WorkerExit(RANK, rank, -int(number), BY, host=host, signal=name.strip()))
            return True
        if rank is None:
            return False
        frame = _FRAME.match(body) if "] [" in body else None
        report = frame is not None or ("***" in body and _REPORT.match(body) is not None)
        if report and len(self.reported) < MAX_TASKS:
            self.reported.add(rank)
        if frame is not None:
            self._frame(rank, int(frame.group(1)), frame.group(2))
        return report

    def _frame(self, rank: int, number: int, frame: str) -> None:
        """Frame ``number`` of the backtrace of ``rank``: a crash of its own once its first frames
        show no abort."""
        if rank in self.crashed or (number == 0 and len(self.backtraces) >= MAX_TASKS):
            return
        frames = self.backtraces.setdefault(rank, []) if number == 0 else self.backtraces.get(rank)
        if frames is None or len(frames) != number:
            return  # its first frames cut: whether it aborted is not seen
        frames.append(frame)
        if len(frames) == FIRST_FRAMES:
            self.crashed.add(rank)
            if any(_ABORT.search(f) for f in frames):
                self.aborted.add(rank)
            else:
                self.kept(WorkerExit(RANK, rank, None, BY, said=CRASHED))
