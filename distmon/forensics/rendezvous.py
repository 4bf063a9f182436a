"""A failure raised while the processes were still meeting: inside ``init_process_group`` or torch's
rendezvous, before any of them had reached the others. Whatever it says (a connection reset or refused, a
timeout, a store it could not make), the processes had not yet met, so none held another up: the launch's
set-up, not a rank. A process failing there because another had already failed elsewhere is told apart by
the other's failure, which the log shows beside it; one failing on its own GPU there (a group made with its
communicator at once takes the device) is that process's fault."""

from __future__ import annotations

import re

from distmon.forensics.failures import GPU_OWN, alone_said
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.stores import REACH
from distmon.wire.schema import StackFrame

_MEETING = frozenset(
    {
        "init_process_group",  # distributed_c10d.py: the default group, its store and rendezvous
        "rendezvous",  # rendezvous.py: the init_method's handler
        "_create_c10d_store",
        "_env_rendezvous_handler",
        "_tcp_rendezvous_handler",
        "next_rendezvous",  # torch elastic's rendezvous handlers, torchrun's agent's side
        "_create_tcp_store",
    }
)
"""torch.distributed's calls that run while the processes meet, before any collective."""
_ON_GPU = re.compile(r"CUDA|\bGPU|invalid device ordinal")
"""A failure of a process's own GPU there besides :data:`~distmon.forensics.failures.GPU_OWN` (another process
holding it, an ordinal past the node's GPUs, its driver, as a group made at once with its communicator takes
its device): one rank's, not the meeting's."""


def raised_meeting(log: LogFacts) -> str | None:
    """Where every failure the log shows (a rank's or a process's, whole or cut, a consequence's too) was raised
    inside those calls, none of them a GPU's own, and the log shows no rank apart from them nor waiting."""
    failed = [r for r in log.exceptions if not (r.launcher or r.stopped or r.launchers)]
    frames = [frame for r in failed if (frame := _meeting(r.frames)) is not None]
    if not frames or len(frames) < len(failed) or any(GPU_OWN.search(r.said) or _ON_GPU.search(r.said) for r in failed):
        return None
    if (alone := alone_said(log, failed)) is None:
        return None
    who, said = alone
    frame = frames[0]
    return (
        f"{who} failed in {frame.func}, as the processes met ({said}): before any of them had reached the others, "
        f"none held another up: the set-up, not a rank: check {REACH}"
    )


def _meeting(frames: list[StackFrame]) -> StackFrame | None:
    """The innermost of torch.distributed's frames among those calls."""
    inner = (f for f in reversed(frames) if f.func in _MEETING and "torch/distributed/" in f.file.replace("\\", "/"))
    return next(inner, None)
