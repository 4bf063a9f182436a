"""The report's schema: what a rank says about itself, as dataclasses (see :mod:`distmon.wire`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VERSION = 1
"""Of the report inside a frame."""

PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused|closed by remote peer"
    r"|caught collective operation timeout|communicator was aborted|monitoredBarrier"
    r"|remote process exited|DistNetworkError|Socket Timeout|(?<!DataLoader )timed out|Horovod has been shut down"
    r"|Connection was likely closed",
    re.IGNORECASE,
)
"""What a rank raises when another one died first (not its own DataLoader's timeout: its worker hung)."""
WORKER_DIED = re.compile(r"DataLoader worker \(pid", re.IGNORECASE)
"""What a rank raises when one of its DataLoader workers died."""
HARDWARE_THROTTLE = frozenset({"hw_slowdown", "hw_thermal", "power_brake"})
"""Throttle reasons that mean the GPU is failing or overheating, not just capped."""


class WireError(ValueError):
    """A message that is not a valid distmon report; ``reason`` says which way, for counting."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class StackFrame:
    """One Python stack frame."""

    file: str
    line: int
    func: str
    code: str | None = None


@dataclass
class GroupStatus:
    """One process group as this rank sees it, from PyTorch's Flight Recorder.

    ``id`` is the group's name (torch's ``group_name``, the same on every member), with
    ``:backend`` appended for a group that has more than one backend. ``enqueued`` and
    ``completed`` are the collective sequence numbers of the group (the SeqNum the NCCL
    watchdog prints), counting collectives only: a group's point-to-point ops are in
    :class:`P2P`. ``enqueued > completed`` means collectives are in flight, and the
    oldest of them, ``completed + 1``, is the one ``op`` and ``since`` describe (NCCL
    routinely runs a few ahead). ``ranks`` is run-length encoded as ``[start, count,
    stride]`` triples so a group of thousands of ranks costs a few bytes.
    """

    id: str
    backend: str
    size: int
    ranks: list[list[int]]
    timeout: float | None
    enqueued: int
    completed: int
    started: int | None = None
    desc: str | None = None
    """``group_desc`` (``default_pg``, ``mesh_tp``, a user's name); absent when it has none."""
    op: str | None = None
    """The op of the oldest collective in flight (``all_reduce``), once the rank has looked it up."""
    since: float | None = None
    """When the oldest collective in flight was enqueued (or first seen incomplete)."""


SEND = "send"
RECV = "recv"
ANY_SOURCE = -1
"""The peer of a receive posted without a source (``dist.recv(t)``): any rank of the group."""


@dataclass
class P2P:
    """One point-to-point channel of this rank: its sends to, or receives from, ``peer`` in
    group ``group`` (a :class:`GroupStatus` ``id``).

    Ops on a channel are numbered from 1 in the order posted; a send #k matches the peer's
    receive #k. ``posted`` and ``completed`` count them. ``pending`` is the oldest op not yet
    completed and ``since`` when it was posted. ``blocked`` is the op the rank is held up in,
    and ``blocked_since`` since when: on gloo, the one its training thread waits in; on NCCL,
    whose waits return at once, the oldest one the GPU has not completed.
    """

    group: str
    peer: int
    """The peer's global rank, or :data:`ANY_SOURCE`."""
    dir: str
    """:data:`SEND` or :data:`RECV`."""
    posted: int
    completed: int
    pending: int | None = None
    since: float | None = None
    blocked: int | None = None
    blocked_since: float | None = None


@dataclass
class StepStats:
    """Step times over the rank's recent steps (seconds)."""

    n: int
    mean: float
    p50: float
    max: float
    last: float


@dataclass
class Pace:
    """How much of its time the rank waits for its peers, sampled by the rank at random
    moments (:data:`PACE_SAMPLES` a second): ``samples`` taken during its steps, ``waiting``
    of them with a collective in flight in one of its groups (started and not completed where
    the backend times them, as NCCL does with ``TORCH_NCCL_ENABLE_TIMING=1``; issued and not
    completed otherwise). Only a step's that ended within :data:`PAUSE_STEPS` of the rank's
    median step count: a pause (an upload, a checkpoint, the others waiting for one) is no
    step of the job's pace. Counted since the rank attached, so a report lost costs nothing."""

    samples: int
    waiting: int


@dataclass
class GpuStatus:
    """The rank's GPU: torch's caching allocator and NVML, each present where available."""

    index: int
    allocated: int | None = None
    reserved: int | None = None
    peak: int | None = None
    used: int | None = None
    total: int | None = None
    util: float | None = None
    temp: float | None = None
    power: float | None = None
    throttle: list[str] | None = None
    xid: int | None = None
    ecc: int | None = None


@dataclass
class Memory:
    """Host memory of the rank's process, and the node's limits that matter for it."""

    rss: int
    host_total: int | None = None
    host_available: int | None = None
    shm_total: int | None = None
    shm_free: int | None = None


@dataclass
class Usage:
    """What the rank's process did over the last ``seconds``: CPU seconds (every thread's),
    and bytes read and written through system calls. A rank the others wait for says so
    whether it works (a checkpoint, an evaluation) or is stuck."""

    seconds: float
    cpu: float
    read: int
    written: int


@dataclass
class Worker:
    """A DataLoader worker process. ``signal`` is a name such as ``SIGKILL``."""

    pid: int
    alive: bool
    exitcode: int | None = None
    signal: str | None = None
    rss: int | None = None
    id: int | None = None
    """The worker's id in its DataLoader (``torch.utils.data.get_worker_info().id``)."""
    stack: list[StackFrame] | None = None
    """Taken from outside with py-spy, innermost last, while a stalled rank waits on this worker."""
    stack_error: str | None = None
    """Why ``stack`` could not be taken."""


@dataclass
class Loader:
    """One live multi-process DataLoader iterator in the rank.

    While the training loop waits in ``next()``, ``waiting`` is the index of the batch it
    waits for, ``worker`` the id of the worker that owes it, and ``since`` when the wait began.
    """

    id: int
    expected: int
    workers: list[Worker]
    waiting: int | None = None
    worker: int | None = None
    since: float | None = None


@dataclass
class ExceptionInfo:
    """An uncaught exception: the rank's last words."""

    type: str
    message: str
    where: StackFrame | None
    traceback: list[StackFrame]
    t: float


TERMINATED = "terminated"
INTERRUPTED = "interrupted"
ENDED = "ended"
FINISHED = "finished"
"""Its training ended before its process did (the training function returned, the process
group was destroyed): the rank said goodbye, and its process may go any way after (Ray Train
kills its workers). A monitor that predates it reads it as ``clean``."""
GONE = "gone"
"""Its process ended, seen from outside: a node's eye, reporting for a rank it found without
the hook (:class:`Outside`), saw it go and cannot tell how (no last words)."""
STOPPED_HOWS = frozenset({TERMINATED, INTERRUPTED, ENDED})
"""The ways a rank is stopped from outside rather than ending on its own."""


@dataclass
class ExitInfo:
    """How the process ended: ``how`` is ``clean``, ``exception``, ``interrupted`` (Ctrl-C),
    ``terminated`` (SIGTERM, as torchrun sends every surviving rank after one fails),
    ``ended`` (by distmon, at the monitor's command: ``--abort-on-hang``), ``finished``
    (:data:`FINISHED`: its training ended cleanly, its process still there), or ``gone``
    (:data:`GONE`: seen from outside, how unknown)."""

    how: str
    t: float


@dataclass
class Outside:
    """What a node's eye says of a rank it found with no hook in it (``distmon watch --find``):
    the report is the eye's, written from the process's environment, ``/proc`` and its stack
    taken from outside; it counts no steps and no collectives."""

    launcher: int | None = None
    """The pid of the process that started the rank (torchrun's agent, ``slurmstepd``, ``mpirun``)."""
    peer: int | None = None
    """The rank its training thread's send or receive names (the op's ``dst`` or ``src``),
    where its stack stands in one."""
    owns_gil: bool = False
    """Its training thread held the GIL when its stack was taken."""
    stack_error: str | None = None
    """Why its stack could not be taken this time (py-spy refused, or found no frame)."""
    stood_since: float | None = None
    """Since when its training thread's stack has stood where it is, whether it made progress
    there or not (a rank spinning at a sync point stands so, busy); None while it moves."""


@dataclass
class Report:
    """A rank's complete state. The only message on the wire."""

    job: str
    rank: int
    world: int
    host: str
    pid: int
    t: float
    n: int
    """Reports sent so far by this process: a gap means lost messages, a reset a restart."""
    interval: float
    local_rank: int = 0
    torch: str | None = None
    backend: str | None = None
    steps: int = 0
    forwards: int = 0
    last_step_t: float | None = None
    step_time: StepStats | None = None
    pace: Pace | None = None
    data_wait: float | None = None
    """Share of the last interval the training loop spent waiting for DataLoader batches."""
    groups: list[GroupStatus] = field(default_factory=list)
    p2p: list[P2P] = field(default_factory=list)
    """Point-to-point channels this rank has used; their ops are not counted in ``groups``."""
    stalled_since: float | None = None
    """Set while the rank has made no progress (steps or collectives) for :func:`stall_after`:
    the moment its progress stopped. The header's ``FLAG_STALLED`` says the same."""
    stack: list[StackFrame] | None = None
    """The training thread's stack (``thread``), innermost last, while stalled."""
    memory: Memory | None = None
    usage: Usage | None = None
    gpu: GpuStatus | None = None
    loaders: list[Loader] = field(default_factory=list)
    exception: ExceptionInfo | None = None
    exit: ExitInfo | None = None
    thread: int | None = None
    """The thread that trains, by ``threading.get_ident()``: the main thread under torchrun, a
    thread of its own under Ray Train. Absent from ranks that predate it."""
    tid: int | None = None
    """The same thread's native id (``threading.get_native_id()``): where to look at it from
    outside (``/proc/PID/task/TID``, py-spy's ``os_thread_id``). Equals ``pid`` for the main
    thread; absent from ranks that predate it."""
    reporter: int | None = None
    """The native id of distmon's own reporting thread in the process: a node's eye counts how
    often it wakes. Waiting for the GIL it wakes about 200 times a second (every
    ``sys.getswitchinterval()``); otherwise about once a report. Absent from ranks that predate it."""
    outside: Outside | None = None
    """Set where a node's eye wrote this report for a rank found from outside; then ``stack`` is
    its training thread's latest, taken by py-spy, and ``stalled_since`` since when it has made
    no progress seen from outside (the same stack at every look, and its thread asleep in it
    or holding the GIL), once that has lasted :data:`STALL_FLOOR` or more."""
    v: int = VERSION


STALL_FLOOR = 2.0
"""A rank calls itself stalled (and sends its stack) after this long without progress, or
:data:`STALL_STEPS` of its step times if longer. The monitor's thresholds for alerting on a
stall, longer, are in :mod:`distmon.monitor.state.limits`."""
STALL_STEPS = 3.0
PAUSE_STEPS = 3.0
"""A step, or a wait in a collective, longer than this many of the rank's median step times is
a pause: the job stood still for a rank (a habit, or a hang), not its pace."""
PACE_SAMPLES = 50.0
"""How often a rank samples whether it waits in a collective, on average, a second."""


def stall_after(step_p50: float | None) -> float:
    """How long without progress makes a rank say it is stalled, given its median step time."""
    return max(STALL_FLOOR, STALL_STEPS * step_p50 if step_p50 else 0.0)


def rank_runs(ranks: list[int]) -> list[list[int]]:
    """Encode a sorted rank list as ``[start, count, stride]`` runs."""
    runs: list[list[int]] = []
    i = 0
    while i < len(ranks):
        start = ranks[i]
        stride = ranks[i + 1] - start if i + 1 < len(ranks) else 1
        count = 1
        while i + count < len(ranks) and ranks[i + count] - ranks[i + count - 1] == stride:
            count += 1
        if count == 1:
            stride = 1
        runs.append([start, count, stride])
        i += count
    return runs


def expand_runs(runs: list[list[int]]) -> list[int]:
    return [start + k * stride for start, count, stride in runs for k in range(count)]
