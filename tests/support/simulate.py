"""A simulated job: the report stream of thousands of ranks, healthy or failing, without torch.

It stands in for what cannot run here (8192 ranks, GPUs) in the detector's unit tests, the
TUI's snapshots and the benchmarks. The model is deliberately simple: every rank runs the
same step, issuing ``collectives_per_step`` collectives on one world process group, or,
with a :class:`Layout`, a tensor-parallel all-reduce, the pipeline's sends and receives
between stages, and a data-parallel all-reduce; a straggler slows every rank's step, since the others wait for it in
each collective; a fault changes what the named rank, and then its peers, would report.

Everything is a pure function of time, so a stream is the same on every run.
"""

from __future__ import annotations

import heapq
import itertools
import math
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import MessageRecord
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import Change
from distmon.wire import (
    P2P,
    PACE_SAMPLES,
    RECV,
    SEND,
    ExceptionInfo,
    ExitInfo,
    GpuStatus,
    GroupStatus,
    Loader,
    Memory,
    Pace,
    Report,
    StackFrame,
    StepStats,
    Worker,
    encode,
    rank_runs,
)

GiB = 1024**3
CONNECTION_CLOSED = (
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[10.0.0.1]:29500. This is typically caused by a remote worker crashing."
)
_TRAIN = "train.py"
IN_COLLECTIVES = 0.1
"""The share of its time a rank of a healthy simulated job spends in collectives: moving the data."""


def _frame(func: str, line: int, code: str, file: str = _TRAIN) -> StackFrame:
    return StackFrame(file=file, line=line, func=func, code=code)


LOOP_STACK = [
    _frame("<module>", 120, "main()"),
    _frame("main", 88, "train_one_epoch(model, loader)"),
]
STACKS = {
    "sleep": [
        *LOOP_STACK,
        _frame("train_one_epoch", 61, "save_checkpoint(model, step)"),
        _frame("save_checkpoint", 34, "time.sleep(600)"),
    ],
    "all_reduce": [
        *LOOP_STACK,
        _frame("train_one_epoch", 57, "loss.backward()"),
        _frame("backward", 623, "torch.autograd.backward(", "torch/_tensor.py"),
    ],
    "p2p": [
        *LOOP_STACK,
        _frame("train_one_epoch", 59, "schedule.step(x, target=y)"),
        _frame("_step_microbatches", 781, "_wait_batch_p2p(bwd_sends)", "torch/distributed/pipelining/schedules.py"),
        _frame("_wait_batch_p2p", 683, "w.wait()", "torch/distributed/pipelining/schedules.py"),
    ],
    "barrier": [
        *LOOP_STACK,
        _frame("train_one_epoch", 64, "dist.barrier()"),
        _frame("barrier", 5356, "work.wait()", "torch/distributed/distributed_c10d.py"),
    ],
    "upload": [
        *LOOP_STACK,
        _frame("train_one_epoch", 66, "upload_metrics(step, loss)"),
        _frame("upload_metrics", 21, "urlopen(request).read()"),
        _frame("readinto", 718, "return self._sock.recv_into(b)", "/usr/lib/python3.11/socket.py"),
    ],
    "sleep_elsewhere": [
        *LOOP_STACK,
        _frame("train_one_epoch", 70, "wait_for_the_file(path)"),
        _frame("wait_for_the_file", 12, "time.sleep(1)"),
    ],
}


Op = tuple[str, ...]
"""One op of a step: ``("tp",)`` or ``("dp",)``, a collective of that group; or ``(SEND, peer,
phase)`` / ``(RECV, peer, phase)``, a blocking point-to-point op on the pipeline group, in the
forward (``fwd``) or backward (``bwd``) phase."""


@dataclass(frozen=True)
class Layout:
    """Tensor x pipeline x data parallel, as Megatron and DeviceMesh lay ranks out: the
    tensor-parallel peers are adjacent, ``dp = world / (tp * pp)``. Groups are named in
    creation order (the world group ``0``, then every tp, pp and dp group), as torch does.

    A step is one microbatch through the pipeline (:meth:`step`): receive the activation
    from the stage before, the tensor-parallel all-reduce, send the activation on and
    receive its gradient back, send the gradient to the stage before, then the
    data-parallel all-reduce. Sends and receives block until the peer posts its side, as
    gloo's do."""

    tp: int
    pp: int = 1
    extra: int = 0
    """Groups a rank is in besides these (Megatron-core's model-parallel, embedding, expert
    and other groups), each over its tensor-parallel peers with one collective a step; listed
    before the others, so the waits of a hang lie in the rank's last group slots."""

    KINDS = ("tp", "pp", "dp")

    def groups(self, rank: int, world: int) -> list[tuple[str, str, list[int]]]:
        """(name, desc, [start, count, stride]) of the rank's tp, pp and dp groups."""
        tp, pp = self.tp, self.pp
        dp = world // (tp * pp)
        t, p, d = rank % tp, (rank // tp) % pp, rank // (tp * pp)
        n_tp, n_pp = world // tp, world // pp
        return [
            (str(1 + d * pp + p), "mesh_tp", [rank - t, tp, 1]),
            (str(1 + n_tp + d * tp + t), "mesh_pp", [d * tp * pp + t, pp, tp]),
            (str(1 + n_tp + n_pp + p * tp + t), "mesh_dp", [p * tp + t, dp, tp * pp]),
        ]

    def step(self, rank: int) -> list[Op]:
        stage, before, after = (rank // self.tp) % self.pp, rank - self.tp, rank + self.tp
        ops: list[Op] = []
        if stage > 0:
            ops.append((RECV, str(before), "fwd"))
        ops.append(("tp",))
        if stage < self.pp - 1:
            ops += [(SEND, str(after), "fwd"), (RECV, str(after), "bwd")]
        if stage > 0:
            ops.append((SEND, str(before), "bwd"))
        ops.append(("dp",))
        return ops


@dataclass
class _Fault:
    kind: str
    rank: int
    at: float
    type: str = ""
    message: str = ""
    factor: float = 1.0
    rate: float = 0.0
    """For a leak: bytes a second; for a straggler: its share of time waiting for data."""
    every: float = 0.0
    """For a pause: seconds from the start of one to the start of the next."""
    seconds: float = 0.0
    """For a pause: how long each lasts."""
    stuck: int | None = None
    """For a pause: the one (counted from 0) that never ends."""
    stack: str = "sleep"
    """Where the rank stands once stalled (a key of ``STACKS``)."""


class SimJob:
    """A job of ``world`` simulated ranks; add faults, then read :meth:`stream`."""

    def __init__(
        self,
        world: int = 8,
        ranks_per_host: int = 8,
        step_time: float = 0.2,
        start: float = 1_700_000_000.0,
        interval: float = 1.0,
        collectives_per_step: int = 2,
        gpu: bool = True,
        timeout: float = 600.0,
        job: str = "sim-job",
        layout: Layout | None = None,
        ahead: int = 0,
    ) -> None:
        self.world = world
        self.ranks_per_host = ranks_per_host
        self.step_time = step_time
        self.start = start
        self.interval = interval
        self.per_step = collectives_per_step
        self.gpu = gpu
        self.timeout = timeout
        self.job = job
        self.layout = layout
        self.ahead = ahead
        """Collectives a rank enqueues beyond the oldest incomplete one, as NCCL does: a
        healthy rank always has some in flight, the oldest of them a fraction of a step old."""
        self.faults: list[_Fault] = []
        self._runs = rank_runs(list(range(world)))
        self._blocked: dict[int, list[int]] = {}
        self._waited: dict[int, list[int]] = {}
        """Per rank, the samples found waiting by each whole second of stepping, summed: drawn
        once, as the stream reaches them."""

    # --- faults -------------------------------------------------------------------------

    def hang(self, rank: int, at: float) -> SimJob:
        """``rank`` stops before its next collective at ``start + at`` (a stuck rank)."""
        self.faults.append(_Fault("hang", rank, self.start + at))
        return self

    def stuck(self, at: float) -> SimJob:
        """The collective every rank issues next after ``start + at`` never completes (the
        transport, not a rank: none is behind)."""
        self.faults.append(_Fault("stuck", -1, self.start + at))
        return self

    def gil(self, rank: int, at: float) -> SimJob:
        """``rank`` holds the GIL in native code: alive, but silent, and the others wait."""
        self.faults.append(_Fault("gil", rank, self.start + at))
        return self

    def pause(
        self, rank: int, at: float, every: float, seconds: float, stuck: int | None = None, stack: str = "upload"
    ) -> SimJob:
        """``rank`` pauses for ``seconds`` before its next collective at ``start + at`` and
        every ``every`` seconds after (a metrics upload, a checkpoint), the others waiting for
        it; pause number ``stuck`` (from 0) never ends. Its stack once stalled: ``STACKS[stack]``."""
        fault = _Fault("pause", rank, self.start + at, every=every, seconds=seconds, stuck=stuck, stack=stack)
        self.faults.append(fault)
        return self

    def extra_collective(self, rank: int, at: float) -> SimJob:
        """``rank`` issues a barrier the others do not (a rank-conditional collective)."""
        self.faults.append(_Fault("extra", rank, self.start + at))
        return self

    def uneven(self, rank: int, at: float) -> SimJob:
        """``rank`` runs out of data one step early and waits at the end-of-epoch barrier."""
        self.faults.append(_Fault("uneven", rank, self.start + at))
        return self

    def exception(self, rank: int, at: float, type: str = "ValueError", message: str = "") -> SimJob:
        message = message or "shape mismatch: expected [16, 32], got [16, 31]"
        self.faults.append(_Fault("exception", rank, self.start + at, type=type, message=message))
        return self

    def kill(self, rank: int, at: float) -> SimJob:
        """``rank`` is killed by SIGKILL: no last words; its peers then lose their connection."""
        self.faults.append(_Fault("kill", rank, self.start + at))
        return self

    def worker_kill(self, rank: int, at: float) -> SimJob:
        self.faults.append(_Fault("worker_kill", rank, self.start + at))
        return self

    def straggler(
        self, rank: int, factor: float = 3.0, data_wait: float = 0.3, at: float = 0.0, lasts: float = math.inf
    ) -> SimJob:
        """``rank`` takes ``factor`` times as long a step from ``start + at`` on, for ``lasts``
        seconds, waiting for data ``data_wait`` of the time (0.02: slow at its own work, a
        sleep in every step)."""
        self.faults.append(_Fault("straggler", rank, self.start + at, factor=factor, rate=data_wait, seconds=lasts))
        return self

    def _slow(self, t: float) -> list[_Fault]:
        """The stragglers slow at ``t``."""
        return [f for f in self.faults if f.kind == "straggler" and f.at <= t < f.at + f.seconds]

    def leak(self, rank: int, bytes_per_second: float, at: float = 0.0) -> SimJob:
        self.faults.append(_Fault("leak", rank, self.start + at, rate=bytes_per_second))
        return self

    # --- the stream ---------------------------------------------------------------------

    def stream(self, until: float, since: float = 0.0) -> Iterator[tuple[float, bytes]]:
        """(time, encoded report) in time order, from ``start + since`` to ``start + until``."""
        for t, rank in self._schedule(self.start + since, self.start + until):
            report = self.report(rank, t)
            if report is not None:
                yield t, encode(report)

    def probe(self, host: str, pid: int) -> str | None:
        """What a monitor on the ranks' host would see: gone for a killed rank."""
        rank = pid - 10_000
        fault = self._stopping_fault(rank)
        if fault is None:
            return "alive"
        return "alive" if fault.kind == "gil" else "gone"

    def _schedule(self, t0: float, t1: float) -> Iterator[tuple[float, int]]:
        """Each rank's periodic reports, plus one at the moment each rank dies."""
        events: list[tuple[float, int, bool]] = []
        for rank in range(self.world):
            phase = self.interval * rank / self.world
            k = max(0, math.ceil((t0 - self.start - phase) / self.interval))
            events.append((self.start + phase + k * self.interval, rank, True))
            stop = self._stopping_fault(rank)
            if stop is not None and not (stop.rank == rank and stop.kind in ("gil", "kill")):
                death = self._death_time(rank, stop)
                if t0 <= death < t1:
                    events.append((death, rank, False))
        heapq.heapify(events)
        while events:
            t, rank, periodic = heapq.heappop(events)
            if t >= t1:
                return
            yield t, rank
            if periodic:
                heapq.heappush(events, (t + self.interval, rank, True))

    @staticmethod
    def _death_time(rank: int, stop: _Fault) -> float:
        """A rank dies with its own fault, or shortly after a peer's, of a lost connection."""
        return stop.at if stop.rank == rank else stop.at + 0.02 + 0.001 * rank

    def _stopping_fault(self, rank: int) -> _Fault | None:
        """The first fault that ends this rank's reports (its own death, or a peer's)."""
        deaths = sorted(
            (f for f in self.faults if f.kind in ("exception", "kill", "worker_kill")),
            key=lambda f: f.at,
        )
        own = [f for f in self.faults if f.rank == rank and f.kind == "gil"]
        candidates = [*own, *deaths[:1]]
        return min(candidates, key=lambda f: f.at) if candidates else None

    def _period(self, t: float) -> float:
        """The job's step at ``t``: the slowest rank's."""
        return self.step_time * max((f.factor for f in self._slow(t)), default=1.0)

    def _steps(self, elapsed: float) -> tuple[int, float]:
        """The steps done in ``elapsed`` seconds of stepping, and when the last one ended (in
        seconds of stepping): the pace changes as each straggler begins."""
        stragglers = [f for f in self.faults if f.kind == "straggler"]
        onsets = sorted({e for f in stragglers for e in (f.at - self.start, f.at - self.start + f.seconds)} - {0.0})
        bounds = [0.0, *(e for e in onsets if e < elapsed), elapsed]
        steps = sum((b - a) / self._period(self.start + a) for a, b in itertools.pairwise(bounds))
        return int(steps), elapsed - (steps - int(steps)) * self._period(self.start + bounds[-2])

    def _share(self, rank: int, t: float) -> float:
        """The share of its time ``rank`` waits in collectives at ``t``: moving the data, and
        the part of the step it is ahead of the slowest rank (whose work takes ``factor``
        times as long; moving the data does not)."""
        slow = self._slow(t)
        slowest = max((f.factor for f in slow), default=1.0)
        own = next((f.factor for f in slow if f.rank == rank), 1.0)
        moving = IN_COLLECTIVES / (1 - IN_COLLECTIVES)  # of a healthy rank's work
        return (slowest - own + moving) / (slowest + moving)

    def _pace(self, rank: int, elapsed: float) -> Pace:
        """The samples of its pace a rank has counted after ``elapsed`` seconds of stepping
        (pauses left out): :data:`~distmon.wire.PACE_SAMPLES` a second, each second's found
        waiting drawn from a binomial of its share (as a normal), the same on every run."""
        per_second = int(PACE_SAMPLES)
        samples = int(PACE_SAMPLES * elapsed)
        whole, part = divmod(samples, per_second)
        sums = self._waited.setdefault(rank, [0])
        while len(sums) <= whole:
            second = len(sums) - 1
            share = self._share(rank, self.start + second)
            u, v = _unit(rank, second, 7) or 0.5, _unit(rank, second, 8)
            noise = math.sqrt(-2 * math.log(u)) * math.cos(2 * math.pi * v)
            drawn = round(per_second * share + noise * math.sqrt(per_second * share * (1 - share)))
            sums.append(sums[-1] + min(per_second, max(0, drawn)))
        waiting = sums[whole] + round(part * self._share(rank, self.start + whole))
        return Pace(samples=samples, waiting=min(waiting, samples))

    def _freeze(self, t: float) -> tuple[_Fault | None, float]:
        """The fault that stops the whole job's progress at ``t`` (the first for good, else a
        pause going on, as a fault that began when it did), and the seconds of pauses over by then."""
        stops = [f for f in self.faults if f.kind in ("hang", "gil", "extra", "uneven", "stuck") and f.at <= t]
        end = min((f.at for f in stops), default=t)
        over = 0.0
        for f in (f for f in self.faults if f.kind == "pause"):
            k = 0
            while f.at + k * f.every <= end:
                began = f.at + k * f.every
                if k == f.stuck or t < began + f.seconds:
                    if not stops:
                        return _Fault("hang", f.rank, began, stack=f.stack), over
                    break
                over += max(0.0, f.seconds - self._period(began))  # the step it paused in ends as it comes back
                k += 1
        return (min(stops, key=lambda f: f.at) if stops else None), over

    def holding_up(self, t: float) -> int | None:
        """The rank the others wait for at ``t`` (stopped, or in a pause), None while all step."""
        freeze, _ = self._freeze(t)
        return freeze.rank if freeze is not None else None

    def report(self, rank: int, t: float) -> Report | None:
        """What ``rank`` sends at time ``t``, or None once it has stopped reporting."""
        period = self._period(t)
        stop = self._stopping_fault(rank)
        last_words: ExceptionInfo | None = None
        exit_info: ExitInfo | None = None
        if stop is not None and t >= stop.at:
            if stop.kind in ("gil", "kill") and stop.rank == rank:
                return None
            death = self._death_time(rank, stop)
            if t > death:
                return None  # said its last words already
            if t == death:
                last_words, exit_info = self._last_words(rank, stop)
        freeze, paused = self._freeze(t)
        frozen_at = freeze.at if freeze is not None else None
        elapsed = (min(t, frozen_at) if frozen_at else t) - self.start - paused
        steps, last_step = self._steps(elapsed)
        base = steps * self.per_step
        enqueued = completed = base
        op = since = None
        stalled_since = None
        stack = None
        if frozen_at is not None and freeze is not None:
            culprit = rank == freeze.rank
            stalled_since = frozen_at
            if freeze.kind in ("hang", "gil", "stuck"):
                if not culprit:
                    enqueued, op, since, stack = (
                        base + 1 + self.ahead,
                        "all_reduce",
                        frozen_at,
                        STACKS["all_reduce"],
                    )
                else:
                    stack = STACKS[freeze.stack]
            else:  # extra or uneven: everyone issues seq base+1, the culprit a different op
                enqueued, since = base + 1, frozen_at
                op = "barrier" if culprit else "all_reduce"
                stack = STACKS[op]
                if freeze.kind == "uneven" and culprit:
                    steps -= 1
            if t - frozen_at < 2.0:
                stalled_since = stack = None
                op = op if t - frozen_at >= self.interval else None
        sampled_in = frozen_at is None and self._in_collective(rank, t)
        if sampled_in:
            enqueued, since = base + 1, self._waiting_since(rank, t)
        if frozen_at is None and self.ahead:
            enqueued, since = base + self.ahead, self.start + last_step
        data_wait = max((f.rate for f in self.faults if f.kind == "straggler" and f.rank == rank), default=0.02)
        step_time = StepStats(n=64, mean=period, p50=period, max=period * 1.1, last=period)
        group = GroupStatus(
            id="0",
            backend="nccl" if self.gpu else "gloo",
            size=self.world,
            ranks=self._runs,
            timeout=self.timeout,
            enqueued=enqueued,
            completed=completed,
            desc="default_pg",
            op=op,
            since=since,
        )
        groups = [group]
        channels: list[P2P] = []
        if self.layout is not None:
            group.enqueued = group.completed = 0
            group.op = group.since = None
            stopped = (
                freeze if frozen_at is not None and freeze is not None and freeze.kind in ("hang", "gil") else None
            )
            more, channels, blocked = self._parallel(rank, steps, t, stopped, sampled_in)
            groups.extend(more)
            if stack is not None and blocked is not None and blocked[0] in (SEND, RECV):
                stack = STACKS["p2p"]
        return Report(
            job=self.job,
            rank=rank,
            world=self.world,
            host=f"node{rank // self.ranks_per_host:03d}",
            pid=10_000 + rank,
            t=t,
            n=int((t - self.start) / self.interval),
            interval=self.interval,
            local_rank=rank % self.ranks_per_host,
            torch="2.13.0",
            backend=group.backend,
            steps=steps,
            forwards=steps,
            last_step_t=self.start + last_step,
            step_time=step_time if steps >= 2 else None,
            pace=self._pace(rank, elapsed),
            data_wait=data_wait,
            groups=groups,
            p2p=channels,
            stalled_since=stalled_since,
            stack=stack,
            memory=Memory(
                rss=int(3 * GiB + self._leaked(rank, t)),
                host_total=512 * GiB,
                host_available=400 * GiB,
                shm_total=64 * GiB,
                shm_free=60 * GiB,
            ),
            gpu=self._gpu(rank, t),
            loaders=[self._loader(rank, t)],
            exception=last_words,
            exit=exit_info,
        )

    def _parallel(
        self, rank: int, steps: int, t: float, stop: _Fault | None, busy: bool
    ) -> tuple[list[GroupStatus], list[P2P], Op | None]:
        """The rank's tp, pp and dp groups and pipeline channels: a step's worth of ops each
        per step, and once a rank has stopped, how far each rank then gets and the op it is
        blocked in (see :meth:`_issued_after_stop`)."""
        assert self.layout is not None
        ops = self.layout.step(rank) * 2
        issued = self._issued_after_stop(stop.rank)[rank] if stop is not None else 0
        blocked = ops[issued - 1] if stop is not None and rank != stop.rank and 0 < issued < len(ops) else None
        done = Counter(ops[: issued - 1 if blocked else issued])
        show_op = stop is not None and t - stop.at >= self.interval
        since = stop.at if stop is not None else None
        backend = "nccl" if self.gpu else "gloo"
        mine = self.layout.groups(rank, self.world)
        (tp, _, peers), names = mine[0], {}
        extra = {"backend": backend, "size": peers[1], "ranks": [peers], "timeout": self.timeout}
        groups = [
            GroupStatus(id=f"{tp}.{k}", enqueued=steps, completed=steps, desc=f"extra_{k}", **extra)
            for k in range(self.layout.extra)
        ]
        for kind, (name, desc, run) in zip(Layout.KINDS, mine, strict=True):
            names[kind] = name
            completed = (steps if kind != "pp" else 0) + done[(kind,)]
            waiting = blocked == (kind,)
            groups.append(
                GroupStatus(
                    id=name,
                    backend=backend,
                    size=run[1],
                    ranks=[run],
                    timeout=self.timeout,
                    enqueued=completed + (1 if waiting or (busy and kind == "tp") else 0),
                    completed=completed,
                    desc=desc,
                    op="all_reduce" if waiting and show_op else None,
                    since=since if waiting else None,
                )
            )
        channels = []
        for op in dict.fromkeys(o for o in ops if o[0] in (SEND, RECV)):
            direction, peer, _ = op
            posted = steps + done[op] + (1 if blocked == op else 0)
            channels.append(
                P2P(
                    group=names["pp"],
                    peer=int(peer),
                    dir=direction,
                    posted=posted,
                    completed=steps + done[op],
                    pending=posted if blocked == op else None,
                    since=since if blocked == op else None,
                    blocked=posted if blocked == op else None,
                    blocked_since=since if blocked == op else None,
                )
            )
        return groups, channels, blocked

    def _issued_after_stop(self, culprit: int) -> list[int]:
        """How many ops of the next two steps each rank issues once ``culprit`` stops before
        its first: a collective completes when every member of its group has issued it, a send
        or receive when the peer has posted its side, and a rank issues its next op when its
        last one completed. Found by repeating until nothing moves, once per culprit."""
        if culprit in self._blocked:
            return self._blocked[culprit]
        assert self.layout is not None
        world = self.world
        ops = [self.layout.step(r) * 2 for r in range(world)]
        group_of = [{k: name for k, (name, _, _) in zip(Layout.KINDS, self.layout.groups(r, world), strict=True)}
                    for r in range(world)]  # fmt: skip
        occurrence = [[o[: j + 1].count(o[j]) for j in range(len(o))] for o in ops]
        issued = [1] * world
        issued[culprit] = 0

        def count(r: int, op: Op) -> int:
            return ops[r][: issued[r]].count(op)

        moved = True
        while moved:
            moved = False
            fewest: dict[tuple[str, str], int] = {}
            for r in range(world):
                for kind in ("tp", "dp"):
                    key = (kind, group_of[r][kind])
                    fewest[key] = min(fewest.get(key, 2), count(r, (kind,)))
            for r in range(world):
                j = issued[r] - 1
                if r == culprit or issued[r] >= len(ops[r]):
                    continue
                op, k = ops[r][j], occurrence[r][j]
                if op[0] in ("tp", "dp"):
                    complete = fewest[(op[0], group_of[r][op[0]])] >= k
                else:
                    partner = (RECV if op[0] == SEND else SEND, str(r), op[2])
                    complete = count(int(op[1]), partner) >= k
                if complete:
                    issued[r] += 1
                    moved = True
        self._blocked[culprit] = issued
        return issued

    def _in_collective(self, rank: int, t: float) -> bool:
        """Caught at a random moment, a rank waits in a collective for its share of the time."""
        return _unit(rank, round(t * 1000)) < self._share(rank, t)

    def _waiting_since(self, rank: int, t: float) -> float | None:
        """Caught in a collective behind a straggler, since when: a moment of the part of its
        step it waits for the straggler (None in a job without one: the start is not shown)."""
        slow = self._slow(t)
        factor = max((f.factor for f in slow), default=1.0)
        if factor == 1.0:
            return None
        own = next((f.factor for f in slow if f.rank == rank), 1.0)
        return t - _unit(rank, round(t * 1000), 1) * self.step_time * (factor - own)

    def _leaked(self, rank: int, t: float) -> float:
        return sum(f.rate * max(0.0, t - f.at) for f in self.faults if f.kind == "leak" and f.rank == rank)

    def _gpu(self, rank: int, t: float) -> GpuStatus | None:
        if not self.gpu:
            return None
        used = int(50 * GiB + self._leaked(rank, t))
        return GpuStatus(
            index=rank % self.ranks_per_host,
            allocated=used - 2 * GiB,
            reserved=used,
            peak=used,
            used=used + GiB,
            total=80 * GiB,
            util=93.0,
            temp=64.0,
            power=610.0,
            throttle=[],
            xid=None,
            ecc=0,
        )

    def _loader(self, rank: int, t: float) -> Loader:
        pids = [20_000 + rank * 10 + i for i in range(2)]
        killed = any(f.kind == "worker_kill" and f.rank == rank and t >= f.at for f in self.faults)
        workers = [Worker(pid=p, alive=True, rss=900 * 1024**2) for p in pids]
        if killed:
            workers[0] = Worker(pid=pids[0], alive=False, signal="SIGKILL")
        return Loader(id=1, expected=2, workers=workers)

    def _last_words(self, rank: int, stop: _Fault) -> tuple[ExceptionInfo, ExitInfo]:
        if stop.rank == rank and stop.kind == "exception":
            exc = ExceptionInfo(
                type=stop.type,
                message=stop.message,
                where=_frame("forward", 42, "x = self.proj(x)"),
                traceback=[*LOOP_STACK, _frame("forward", 42, "x = self.proj(x)")],
                t=stop.at,
            )
        elif stop.rank == rank and stop.kind == "worker_kill":
            pid = 20_000 + rank * 10
            exc = ExceptionInfo(
                type="RuntimeError",
                message=f"DataLoader worker (pid {pid}) is killed by signal: Killed. ",
                where=_frame(
                    "handler",
                    73,
                    "_error_if_any_worker_fails()",
                    "torch/utils/data/_utils/signal_handling.py",
                ),
                traceback=[*LOOP_STACK],
                t=stop.at,
            )
        else:
            exc = ExceptionInfo(
                type="RuntimeError",
                message=CONNECTION_CLOSED,
                where=STACKS["all_reduce"][-1],
                traceback=STACKS["all_reduce"],
                t=self._death_time(rank, stop),
            )
        return exc, ExitInfo(how="exception", t=exc.t)


def _unit(*key: int) -> float:
    """A deterministic pseudo-random number in [0, 1) for ``key``."""
    return zlib.crc32(repr(key).encode()) / 2**32


def drive(sim: SimJob, monitor: Monitor, until: float) -> list[tuple[float, Change]]:
    """Feed ``sim``'s stream into ``monitor`` through the monitor's one loop (a feed of its
    records and :class:`~distmon.monitor.session.Session`), up to ``until`` seconds of sim time.

    Returns every alert change with the time of the tick that made it, as a live monitor
    would see them.
    """
    records = (MessageRecord(t, raw) for t, raw in sim.stream(until=until))
    session = Session(ReplayFeed(records, speed=math.inf, end=sim.start + until), monitor)
    return list(session.drain())
