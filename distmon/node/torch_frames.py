"""What a rank's stack says of torch.distributed, read one way by a node's eye (a found rank's
peer, its rank while it joins the job) and by the monitor (where a rank waits, and on whom).

A rank waiting on its peers stands in a collective (``distributed_c10d.py``; DDP's gradient
all-reduce runs inside autograd's ``backward``), a send or receive (plain, batched, or a pipeline
library's), or ``init_process_group`` (the rendezvous); the op is the innermost
``distributed_c10d.py`` frame's function.
"""

from __future__ import annotations

from distmon.wire import StackFrame

C10D = "torch/distributed/distributed_c10d.py"
INIT_FUNCS = frozenset(
    {"init_process_group", "rendezvous", "_store_based_barrier", "_create_c10d_store", "init_device_mesh"}
)
NEXT_FUNCS = frozenset({"__next__", "_next_data", "_get_data", "_try_get_data"})
DATALOADER = "torch/utils/data/dataloader.py"
P2P_FRAMES = (
    ("torch/distributed/pipelining/", frozenset({"_wait_batch_p2p", "_batch_p2p", "_sorted_batch_p2p"})),
    (C10D, frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list"})),
    ("megatron/core/pipeline_parallel/p2p_communication.py", None),
    ("deepspeed/runtime/pipe/p2p.py", None),
)
"""(path part, functions or None for all): frames of a point-to-point send or receive, plain
(``dist.send``), batched, or a pipeline library's (torch.distributed.pipelining, Megatron,
DeepSpeed). The frame below ``Work.wait``, which is native, names the op."""


def c10d_op(frames: list[StackFrame]) -> str | None:
    """The torch.distributed call the stack stands in: its innermost ``distributed_c10d.py``
    frame's function."""
    return next((f.func for f in reversed(frames) if f.file.endswith(C10D)), None)


def in_dataloader(frames: list[StackFrame]) -> bool:
    """Waiting for a DataLoader batch."""
    return any(f.func in NEXT_FUNCS and f.file.endswith(DATALOADER) for f in frames)


def in_init(frames: list[StackFrame]) -> bool:
    """Joining the job: ``init_process_group``'s rendezvous, a store's barrier, a device mesh."""
    return any(f.func in INIT_FUNCS and "torch/distributed/" in f.file for f in frames)


def p2p_frames(frames: list[StackFrame]) -> list[StackFrame]:
    """The frames of a send or receive, outermost first; none where the stack stands in none."""
    return [f for f in frames for part, funcs in P2P_FRAMES if part in f.file and (funcs is None or f.func in funcs)]


def in_backward(frames: list[StackFrame]) -> bool:
    """In autograd's backward: with DDP, where its gradient all-reduce waits."""
    return any(f.func == "backward" and "torch/autograd/" in f.file for f in frames)


def waits_on_peers(frames: list[StackFrame] | None) -> bool:
    """The stack stands where a rank waits on its peers: in ``init_process_group``, a send or
    receive, or a collective (DDP's in backward); not while it waits on its DataLoader."""
    if not frames or in_dataloader(frames):
        return False
    return in_init(frames) or bool(p2p_frames(frames)) or c10d_op(frames) is not None or in_backward(frames)
