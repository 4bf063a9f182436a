"""Point-to-point traffic of this rank, per channel: group, peer and direction.

Every p2p path in torch ends in the same methods: ``dist.send/recv/isend/irecv``,
``batch_isend_irecv`` and ``P2POp``, ``torch.distributed.pipelining``, Megatron's
``p2p_communication`` all post with ``ProcessGroup.send`` / ``ProcessGroup.recv`` (or
``recv_anysource``) and block in ``Work.wait``. Those are wrapped on their classes;
``dist.isend`` itself is left alone, since ``P2POp`` checks it by identity.

On the training thread a posted op costs a counter, a clock read and an append, and a wait
two dictionary writes; the sampler thread (:meth:`P2PTracker.read`) does the rest. Works are
held by weak reference, so the hook never keeps a tensor alive: a work that is gone was
waited for, or dropped by its owner.

The groups' collective counts need the p2p ops taken out (:meth:`P2PTracker.collectives`):

- gloo numbers p2p ops in the group's sequence (``seq_``) without recording them, and its
  Flight Recorder status gives each collective that sequence number; so the collectives
  issued are the group's sequence number less the p2p ops posted.
- NCCL counts collectives apart (``_get_sequence_number_for_group`` is ``seqCollective_``),
  but its status takes the number of whichever work came last, a collective's or a p2p op's
  (``seqP2P_``); so the count of collectives issued is read from the group itself, and the
  status is believed only up to it.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from distmon.wire import ANY_SOURCE, P2P, RECV, SEND

MAX_PENDING = 4096
"""Ops kept per channel while not completed; beyond that the oldest count as completed."""
MAX_CHANNELS = 1024
"""Channels followed per group (a pipeline stage uses two to four; a p2p all-to-all one per
peer). Ops on further channels are counted, so the group's collective counts stay right, and
the rank says once on stderr that their peers are not followed."""
MAX_COUNTS = 64
"""gloo status numbers remembered per group, for completions that lag behind."""

Pending = tuple[int, float, "weakref.ref[Any] | None"]
"""(ordinal on its channel, when posted, the work)."""


@dataclass(eq=False)
class Channel:
    peer: int
    """The peer's rank in the group, or :data:`ANY_SOURCE`."""
    dir: str
    cuda: bool
    posted: int = 0
    pending: deque[Pending] = field(default_factory=lambda: deque(maxlen=MAX_PENDING))
    stuck: tuple[int, float] | None = None
    """(ordinal, when first seen): an op on a GPU not completed across samples."""


@dataclass(eq=False)
class Traffic:
    """One group's p2p ops: its channels and what the collective counts need of them."""

    group: weakref.ref[Any]
    sequenced: bool
    """gloo: p2p ops advance the group's sequence number, as collectives do."""
    channels: dict[tuple[int, str], Channel] = field(default_factory=dict)
    before: int = 0
    """p2p ops the group carried before the hook was installed."""
    unfollowed: int = 0
    """p2p ops on channels beyond :data:`MAX_CHANNELS`."""
    latest: int = 0
    """The group's sequence number when last read, before its status."""
    counts: dict[int, int] = field(default_factory=dict)
    """gloo: status numbers seen as the last collective enqueued -> collectives up to it."""

    def posted(self) -> int:
        return self.before + self.unfollowed + sum(channel.posted for channel in list(self.channels.values()))

    def count(self, enqueued: int, completed: int) -> tuple[int, int]:
        """gloo's status numbers as counts of collectives. Every op takes the next sequence
        number, so the collectives issued are the group's sequence number less its p2p ops;
        the last one enqueued took the status's number, which is remembered, so that a
        completion lagging behind is counted when it shows it."""
        issued = max(0, self.latest - self.posted())
        if enqueued > 0:
            self.counts.setdefault(enqueued, issued)
            while len(self.counts) > MAX_COUNTS:
                del self.counts[next(iter(self.counts))]
        if completed >= enqueued:
            return issued, issued
        return issued, self.counts.get(completed, max(0, issued - 1))


class P2PTracker:
    def __init__(self) -> None:
        self._traffic: dict[int, Traffic] = {}
        self._blocked: dict[int, tuple[Any, float]] = {}
        """Thread id -> (the work it waits in, since when)."""
        self._originals: dict[str, tuple[type, Any]] = {}

    def install(self) -> None:
        """Wrap the p2p methods on their classes, once."""
        from torch._C import _distributed_c10d as c10d

        if self._originals:
            return
        group, work = c10d.ProcessGroup, c10d.Work
        send, recv, recv_any, wait = group.send, group.recv, group.recv_anysource, work.wait
        posted, blocked = self._posted, self._blocked

        def send_(pg: Any, *args: Any, **kwargs: Any) -> Any:
            handle = send(pg, *args, **kwargs)
            posted(pg, args[1] if len(args) > 1 else kwargs.get("dstRank", ANY_SOURCE), SEND, handle, args, kwargs)
            return handle

        def recv_(pg: Any, *args: Any, **kwargs: Any) -> Any:
            handle = recv(pg, *args, **kwargs)
            posted(pg, args[1] if len(args) > 1 else kwargs.get("srcRank", ANY_SOURCE), RECV, handle, args, kwargs)
            return handle

        def recv_anysource_(pg: Any, *args: Any, **kwargs: Any) -> Any:
            handle = recv_any(pg, *args, **kwargs)
            posted(pg, ANY_SOURCE, RECV, handle, args, kwargs)
            return handle

        def wait_(handle: Any, *args: Any, **kwargs: Any) -> Any:
            thread = threading.get_ident()
            blocked[thread] = (handle, time.time())
            try:
                return wait(handle, *args, **kwargs)
            finally:
                blocked.pop(thread, None)

        for cls, name, wrapper in (
            (group, "send", send_),
            (group, "recv", recv_),
            (group, "recv_anysource", recv_anysource_),
            (work, "wait", wait_),
        ):
            # The class's own entry, a descriptor: read off the class, a pybind11 method is a
            # bare function that would no longer bind ``self`` once put back.
            self._originals[name] = (cls, vars(cls)[name])
            setattr(cls, name, wrapper)

    def uninstall(self) -> None:
        for name, (cls, original) in self._originals.items():
            setattr(cls, name, original)
        self._originals = {}

    def carried(self, pg: Any, ops: int) -> None:
        """``pg`` carried ``ops`` p2p ops before the hook was installed."""
        self._traffic_of(pg).before = ops

    def _posted(self, pg: Any, peer: int, direction: str, handle: Any, args: Any, kwargs: Any) -> None:
        """On the training thread, after each post, so it does the least it can
        (``benchmarks/bench_hook.py`` measures the step)."""
        try:
            traffic = self._traffic_of(pg)
            channel = traffic.channels.get((peer, direction))
            if channel is None:
                if len(traffic.channels) >= MAX_CHANNELS:
                    if not traffic.unfollowed:
                        print(
                            f"distmon: a process group has more than {MAX_CHANNELS} send/recv peers on this rank; "
                            "ops to the rest are counted but their peers are not followed",
                            file=sys.stderr,
                        )
                    traffic.unfollowed += 1
                    return
                tensors = args[0] if args else kwargs.get("tensors", ())
                channel = traffic.channels[(peer, direction)] = Channel(peer, direction, _on_cuda(tensors))
            ref = weakref.ref(handle) if handle is not None else None
            channel.pending.append((channel.posted + 1, time.time(), ref))
            channel.posted += 1
        except Exception:
            pass  # monitoring must never fail a send

    def _traffic_of(self, pg: Any) -> Traffic:
        traffic = self._traffic.get(id(pg))
        if traffic is None or traffic.group() is not pg:
            traffic = self._traffic[id(pg)] = Traffic(weakref.ref(pg), sequenced=_counts_p2p(pg))
        return traffic

    def groups(self) -> Iterator[tuple[Any, Traffic]]:
        """Each live group with p2p traffic; destroyed groups are forgotten."""
        for key, traffic in list(self._traffic.items()):
            pg = traffic.group()
            if pg is None:
                del self._traffic[key]
                continue
            yield pg, traffic

    def before_status(self) -> None:
        """Read each group's sequence number, just before the Flight Recorder's status."""
        for pg, traffic in self.groups():
            if traffic.channels or traffic.before:
                traffic.latest = pg._get_sequence_number_for_group()

    def collectives(self, pg: Any, enqueued: int, completed: int) -> tuple[int, int]:
        """The collectives issued and completed, from the Flight Recorder status numbers of
        ``pg`` read after :meth:`before_status`."""
        traffic = self._traffic.get(id(pg))
        if traffic is None or traffic.group() is not pg or not (traffic.channels or traffic.before):
            return enqueued, completed
        if not traffic.sequenced:  # NCCL: the status may hold a p2p op's number
            return traffic.latest, min(completed, traffic.latest)
        return traffic.count(enqueued, completed)

    def carries(self, pg: Any) -> bool:
        traffic = self._traffic.get(id(pg))
        return traffic is not None and traffic.group() is pg and bool(traffic.channels)

    def read(
        self,
        describe: Callable[[Any, Channel], tuple[str, int] | None],
        gpu: dict[str, dict[tuple[int, str], tuple[int, float]]] | None = None,
    ) -> list[P2P]:
        """Every channel's state; ``describe(group, channel)`` gives its group id and the
        peer's global rank, or None for a group no longer known. ``gpu`` has, per group id and
        channel, the ops a GPU has not completed (count, oldest) where a dump said so."""
        now = time.time()
        waiting = {id(handle): since for handle, since in list(self._blocked.values())}
        out = []
        for pg, traffic in self.groups():
            for channel in list(traffic.channels.values()):
                names = describe(pg, channel)
                if names is None:
                    continue
                state = _channel_state(channel, names, waiting, now)
                behind = (gpu or {}).get(names[0], {}).get((names[1], channel.dir))
                if behind is not None and channel.cuda:
                    _on_the_gpu(state, *behind)
                out.append(state)
        return out


def _on_the_gpu(state: P2P, count: int, oldest: float) -> None:
    """What the GPU's recorder says of a channel: ``count`` ops in flight, the oldest since
    ``oldest``. Their works were waited for on the CPU (and gone), so it alone knows."""
    state.completed = min(state.completed, state.posted - count)
    state.pending = state.blocked = state.completed + 1
    state.since = state.blocked_since = oldest


def _channel_state(channel: Channel, names: tuple[str, int], waiting: dict[int, float], now: float) -> P2P:
    """Completed ops are those before the oldest one still pending: a channel's ops are
    waited for in the order posted."""
    posted = channel.posted
    first: tuple[int, float] | None = None
    blocked: tuple[int, float] | None = None
    for ordinal, posted_at, ref in list(channel.pending):
        handle = ref() if ref is not None else None
        if ordinal > posted or handle is None or _completed(handle):
            continue
        if first is None:
            first = (ordinal, posted_at)
        if id(handle) in waiting:
            blocked = (ordinal, waiting[id(handle)])
            break
    done = first[0] - 1 if first is not None else posted
    while channel.pending and channel.pending[0][0] <= done:
        channel.pending.popleft()
    if channel.cuda:  # NCCL's wait returns at once: the op the GPU has not completed holds it up
        if first is None or channel.stuck is None or channel.stuck[0] != first[0]:
            channel.stuck = None if first is None else (first[0], now)
        elif blocked is None and channel.stuck[1] < now:
            blocked = first
    group, peer = names
    return P2P(
        group=group,
        peer=peer,
        dir=channel.dir,
        posted=posted,
        completed=done,
        pending=first[0] if first else None,
        since=first[1] if first else None,
        blocked=blocked[0] if blocked else None,
        blocked_since=blocked[1] if blocked else None,
    )


def _completed(handle: Any) -> bool:
    try:
        return bool(handle.is_completed())
    except Exception:
        return True  # a work that cannot say (aborted, torn down) holds nobody up


def _counts_p2p(pg: Any) -> bool:
    """gloo numbers p2p ops in the group's sequence; NCCL keeps them apart."""
    import torch.distributed as dist

    try:
        return str(dist.get_backend(pg)) == "gloo"
    except Exception:
        return False


def _on_cuda(tensors: Any) -> bool:
    try:
        return bool(tensors[0].is_cuda)
    except Exception:
        return False
