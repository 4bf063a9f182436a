"""Every kind the monitor names, declared once with its classes beside it: the alerts it
raises (which fail a job, which say it stands still, which are worth ending it for), and what a
rank is doing, where its stack stands or as its process is seen from outside (one vocabulary:
a rank asleep is ``sleeping`` whether its stack or ``/proc`` says so).

An alert's kind is the ``kind`` of every alert in recordings, ``distmon report --json`` and
notifications: a name users' tools read, never changed.
"""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, Enum):
        """Python 3.10's stand-in for 3.11's ``enum.StrEnum``: a member is its value, in
        ``str()`` and ``format()`` alike (``f"{AlertKind.HANG}"`` is ``hang``)."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(self, spec)


class AlertKind(StrEnum):
    HANG = "hang"
    DIVERGENCE = "divergence"
    STALL = "stall"
    RANK_EXCEPTION = "rank_exception"
    RANK_LOST = "rank_lost"
    NODE_LOST = "node_lost"
    NODE_UNWATCHED = "node_unwatched"
    LINK_FLAPPING = "link_flapping"
    WORKER_CRASH = "worker_crash"
    STRAGGLER = "straggler"
    MEMORY_PRESSURE = "memory_pressure"
    GPU_FAULT = "gpu_fault"
    MONITOR_BEHIND = "monitor_behind"


FAILURE_KINDS = frozenset({AlertKind.RANK_EXCEPTION, AlertKind.RANK_LOST, AlertKind.NODE_LOST, AlertKind.WORKER_CRASH})
"""A rank, its worker or its node failed: the job failed, whatever else stands."""
HUNG_KINDS = frozenset({AlertKind.HANG, AlertKind.DIVERGENCE, AlertKind.STALL})
"""The job stands still while one of these stands critical: a job stopped then was stopped
while hung."""
STORY_KINDS = FAILURE_KINDS | HUNG_KINDS
"""The kinds that tell how a job ends: a first cause is one of these."""
ENDING_KINDS = frozenset({AlertKind.HANG, AlertKind.DIVERGENCE, AlertKind.RANK_LOST, AlertKind.NODE_LOST})
"""Worth ending the job for (``--abort-on-hang``): the job will not come back by itself."""


class Doing(StrEnum):
    """What a rank is doing: where its stack stands (a place: :mod:`~distmon.monitor.state.whereabouts`),
    or what its process does as the kernel shows it (a verdict: :mod:`distmon.monitor.outside.verdicts`)."""

    SLEEPING = "sleeping"
    FILE_IO = "file_io"
    GIL = "gil"
    LOCK = "lock"
    UNKNOWN = "unknown"
    DATALOADER = "dataloader"
    INIT = "init"
    P2P = "p2p"
    COLLECTIVE = "collective"
    CUDA = "cuda"
    USER = "user"
    SIGSTOPPED = "sigstopped"
    TRACED = "traced"
    ZOMBIE = "zombie"
    GONE = "gone"
    WORKING = "working"
    NETWORK = "network"


PLACES = frozenset(
    {Doing.GIL, Doing.DATALOADER, Doing.INIT, Doing.P2P, Doing.COLLECTIVE, Doing.CUDA, Doing.FILE_IO,
     Doing.SLEEPING, Doing.LOCK, Doing.USER, Doing.UNKNOWN}
)  # fmt: skip
"""Where a stack can stand."""
WAITING_PLACES = frozenset({Doing.INIT, Doing.COLLECTIVE, Doing.P2P, Doing.DATALOADER})
"""Places where a rank waits on others: the large group found there are victims."""
VERDICTS = frozenset(
    {Doing.SIGSTOPPED, Doing.TRACED, Doing.ZOMBIE, Doing.GONE, Doing.WORKING, Doing.FILE_IO, Doing.NETWORK,
     Doing.GIL, Doing.LOCK, Doing.SLEEPING, Doing.UNKNOWN}
)  # fmt: skip
"""What a process can be seen doing from outside."""
IDLE_VERDICTS = frozenset({Doing.SIGSTOPPED, Doing.TRACED, Doing.FILE_IO, Doing.GIL, Doing.LOCK, Doing.SLEEPING})
"""Verdicts of a process that does nothing: a rank the others wait for, seen so for a second,
is named early (:attr:`distmon.monitor.state.limits.Thresholds.early_floor`)."""
MOVING_VERDICTS = frozenset({Doing.SLEEPING, Doing.LOCK, Doing.UNKNOWN})
"""Verdicts of one look that a main thread seen in other calls over the same wait belies."""
NEVER_USUAL = frozenset({Doing.SIGSTOPPED, Doing.TRACED, Doing.ZOMBIE, Doing.GONE})
"""What a process does that is no habit, however often: someone stopped it, or it ended."""
