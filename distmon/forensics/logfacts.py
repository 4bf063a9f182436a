"""What a job's log says, rank by rank: each rank's waits by group (its watchdog's lines), the
exceptions it raised, and what torch's reports, NCCL, the transports and the launchers said of
the job (read by :mod:`~distmon.forensics.logs`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from distmon.forensics.crashes import Crashes
from distmon.forensics.deepspeed_nodes import DeepSpeedNodes
from distmon.forensics.desync import DesyncLines
from distmon.forensics.distributed_debug import DebugChecks
from distmon.forensics.environment import Environment
from distmon.forensics.fr_trace import AnalyzerFindings, FrTraceLines
from distmon.forensics.grad_norms import GradNorms
from distmon.forensics.horovod import HorovodStalls
from distmon.forensics.main_only import MainOnly
from distmon.forensics.nccl import MAX_GROUP, NcclLines
from distmon.forensics.pasted_stacks import PastedStacks
from distmon.forensics.peers import PeerLines
from distmon.forensics.ras import RasReport
from distmon.forensics.ray_actors import RayActors
from distmon.forensics.stores import StoreLines
from distmon.forensics.tracebacks import Raised
from distmon.forensics.watchdog import DEFAULT_PG, GATHERS, SCATTERS, WORLD_GROUP, Said
from distmon.forensics.worker_exits import ON_A_NODE, RANK, WORKER, WorkerExit
from distmon.forensics.xids import XidLines
from distmon.monitor.state.words import first_line
from distmon.wire import ExceptionInfo, StackFrame

MAX_SPREAD = 2
"""How far apart the works two ranks of one group time out in may lie: a collective no member
completed holds every member at it (a rooted one's root may be a work ahead)."""
STEP_CANCELLED = "step"
"""Slurm cancelled a step and gave no reason: ``scancel``, or srun ending the step's other tasks after one failed
(``--kill-on-bad-exit``; a Slurm of 2025 or later says ``DUE TO TASK FAILURE``)."""


@dataclass
class Timeout:
    """What a rank's watchdog said of one group (or, :attr:`group` None, of a group it did not
    name)."""

    group: str | None
    desc: str | None = None
    local: int | None = None
    """The rank's place in the group (``Rank k`` of the PG prefix)."""
    seq: int | None = None
    """The work that timed out; None where the line gives no number (torch 1.10 and older, a
    stuck watchdog)."""
    op: str | None = None
    enqueued: int = 0
    completed: int | None = None
    ran: float | None = None
    """Seconds it ran before the watchdog gave up, as the line says."""
    said_at: float | None = None
    """When the watchdog said so."""
    timeout_ms: int | None = None
    numel: tuple[int, int] | None = None
    stuck: float | None = None
    """The watchdog itself stuck (its heartbeat lines): seconds, 0 where they do not say."""
    idle: bool = False
    """Nothing in flight in the group (a Flight Recorder dump signal's counts): no wait."""

    def take(self, found: Said, at: float | None) -> None:
        """What one more line says of the same work (the last line read counts: after a
        restart, the numbers start again)."""
        self.desc = found.desc or self.desc
        self.local = found.local if found.local is not None else self.local
        self.said_at = at if at is not None else self.said_at
        if found.seq is not None:
            self.seq = found.seq
        self.op = found.op or self.op
        self.ran = found.ran if found.ran is not None else self.ran
        self.timeout_ms = found.timeout_ms or self.timeout_ms
        self.numel = found.numel or self.numel
        self.stuck = found.stuck if found.stuck is not None else self.stuck
        if found.enqueued is not None:
            self.enqueued, self.completed, self.idle = found.enqueued, found.completed, found.idle
        if self.idle:
            self.seq = None
        if self.seq is not None and self.completed is not None and not -1 <= self.completed < self.seq:
            self.completed = None  # a count no watchdog prints for the work it gave up on: garbled
        self.enqueued = max(self.enqueued, self.seq or 0)

    @property
    def since(self) -> float | None:
        """When the work was enqueued: the line's time less how long it ran."""
        if self.said_at is None:
            return None
        return self.said_at - (self.ran if self.ran is not None else self.stuck or 0.0)

    def size(self) -> int | None:
        """The group's size, from an all-gather's or a reduce-scatter's element counts."""
        if self.numel is None or not all(self.numel):
            return None
        n_in, n_out = self.numel
        ratio, rest = (
            divmod(n_out, n_in) if self.op in GATHERS else divmod(n_in, n_out) if self.op in SCATTERS else (0, 1)
        )
        return ratio if not rest and 1 < ratio <= MAX_GROUP else None


@dataclass
class Layout:
    """A group as its ``ProcessGroupNCCL initialization options`` lines tell it."""

    size: int
    members: dict[int, int] = field(default_factory=dict)
    """Group-local rank -> global rank, of the members that printed the line."""


@dataclass
class LogFacts:
    """A log's ranks: those it shows, each one's timeouts by group, and those that raised."""

    seen: set[int] = field(default_factory=set)
    timeouts: dict[int, dict[str, Timeout]] = field(default_factory=dict)
    loose: dict[int, list[Timeout]] = field(default_factory=dict)
    """Per rank, its watchdog lines that named no group, until :meth:`place` places them."""
    unnamed: dict[int, list[Timeout]] = field(default_factory=dict)
    """Per rank, its waits in groups the log does not name (several without a PG prefix)."""
    raised: dict[int, Raised] = field(default_factory=dict)
    unplaced: list[Raised] = field(default_factory=list)
    """Exceptions whose rank the log does not say."""
    world: int | None = None
    """As a launcher printed it, or the world group's ``initialization options`` line."""
    listed: int | None = None
    """The highest rank torchrun's failure table lists."""
    layouts: dict[str, Layout] = field(default_factory=dict)
    latest: float | None = None
    """The latest watchdog line's or exception's time."""
    dated: bool = False
    """A line gave its year before any glog stamp was read (glog stamps give none: theirs is taken
    from such a line, else this year's)."""
    unplaced_lines: int = 0
    """Watchdog lines whose rank the log does not say."""
    unplaced_said: list[Said] = field(default_factory=list)
    """What the first of them say."""
    restarts: list[str] = field(default_factory=list)
    """Per log whose torchrun restarted its workers, in words: how many times, and the first failure before its
    last attempt, which alone the log is judged on."""
    matched: int = 0
    """Lines read that a rank's prefix, the watchdog, a report or a launcher wrote."""
    exits: list[WorkerExit] = field(default_factory=list)
    """How the launchers say their workers ended."""
    debug: DebugChecks = field(default_factory=DebugChecks)
    desync: DesyncLines = field(default_factory=DesyncLines)
    fr_trace: FrTraceLines = field(default_factory=FrTraceLines)
    horovod: HorovodStalls = field(default_factory=HorovodStalls)
    grad_norms: GradNorms = field(default_factory=GradNorms)
    main_only: MainOnly = field(default_factory=MainOnly)
    nccl: NcclLines = field(default_factory=NcclLines)
    peers: PeerLines = field(default_factory=PeerLines)
    ray: RayActors = field(default_factory=RayActors)
    deepspeed: DeepSpeedNodes = field(default_factory=DeepSpeedNodes)
    ras: RasReport = field(default_factory=RasReport)
    xids: XidLines = field(default_factory=XidLines)
    crashes: Crashes = field(default_factory=Crashes)
    stores: StoreLines = field(default_factory=StoreLines)
    environment: Environment = field(default_factory=Environment)
    stacks: PastedStacks = field(default_factory=PastedStacks)
    progress: tuple[int | None, str] | None = None
    """The last progress bar the log shows short of its end, and the rank that drew it where a
    prefix says: a rank still working when the lines after it were written."""
    left: dict[int, str] = field(default_factory=dict)
    """Ranks whose own lines say their training loop ended (torchtitan's ``Training completed``), with those words."""
    finished: bool = False
    """A line says the job's work ended (Lightning's ``Trainer.fit`` stopped, transformers'
    Trainer's training completed, googletest's tear-down): the ranks left its collectives behind."""
    exiting: tuple[str, str] | None = None
    """Who, and torch's or CUDA's words, where a line says a process was exiting as its watchdog
    still ran (``driver shutting down``): the end of a process, no failure."""
    signalled: int | None = None
    """The signal torchrun's agent itself received (``Received 1 death signal``): it shut its
    workers down."""
    signalled_at: float | None = None
    """When, where the log gives the time."""
    cancelled: str | None = None
    """Why Slurm cancelled the job or its step (``CANCELLED AT ... DUE TO TIME LIMIT``; empty: a
    user cancelled the job, ``scancel``; :data:`STEP_CANCELLED`: no reason given for a step)."""
    failed_node: str | None = None
    """The node srun says Slurm lost (``srun: error: Node failure on gpu-node-07``)."""
    cancelled_after: bool = False
    """Slurm cancelled the step, for no reason it gives, after a task had failed or its cgroup had
    killed one for memory: srun's own teardown of the step, not a cancel from outside."""
    step_ended: bool = False
    """srun said it was ending the step itself (``srun: Terminating StepId=12.0``)."""
    closed: frozenset[int] = frozenset()
    """The pids of the workers torchrun's agent sent its closing signal (``Sending process 4242 closing signal
    SIGTERM``): still running as it tore them down, after the failure it saw (or the signal it got)."""
    reported: frozenset[int] = frozenset()
    """The ranks a signal handler's report shows ended by a signal (Open MPI's, under mpirun's label), which it says
    or a paste cut, but not aborting (a waiter's abort is that rank waiting): none went on, nor waited."""
    went_on: set[int] = field(default_factory=set)
    """Ranks that wrote a line of their own (no traceback's) after another rank raised: they did not."""
    cut_waiting: int = 0
    """Tracebacks the log cuts inside a collective call: ranks that were waiting, their exceptions unseen."""
    cut_in: dict[int, str] = field(default_factory=dict)
    """The ranks of those tracebacks, each with where it stood (``all_reduce (distributed_c10d.py:2221)``)."""
    cut_nameless: Raised | None = None
    """The traceback no label places that the log cuts before its exception line, where it ends so."""
    folded: int = 0
    """The most processes Ray says wrote a frame of a traceback no label places, beside the one it shows
    (``[repeated 7x across cluster]``): they raised the same way."""
    oom_killed: str | None = None
    """slurmstepd's word that the step's cgroup killed a process for memory."""
    agents_under_srun: bool = False
    """srun started a launcher on each node (its command line says so): its tasks are nodes, not ranks."""
    announced: dict[int, int] = field(default_factory=dict)
    """How many processes announced each global rank (Lightning's ``GLOBAL_RANK: 1, MEMBER: 2/4``)."""
    timed_out: bool = False
    """A watchdog's frames say a collective timed out (``WorkNCCL::checkTimeout``) on a rank the log
    does not name."""

    def cancel(self, unit: str, reason: str | None) -> bool:
        """Slurm cancelled the job or a step: kept where its words say more than a line before did (a reason, then a
        job cancelled for none, then a step, which srun ending it after a task failed says so too)."""
        said = reason or ("" if unit == "JOB" else STEP_CANCELLED)
        weight = {None: 0, STEP_CANCELLED: 1, "": 2}
        if weight.get(said, 3) <= weight.get(self.cancelled, 3):
            return False
        self.cancelled = said
        return True

    def unjoined(self) -> AnalyzerFindings:
        """What Flight Recorder's analyzer's reports prove, beside the ranks' own watchdog lines
        (a rank shown waiting elsewhere is not one that never came)."""
        return self.fr_trace.judged(set(self.timeouts))

    def forget(self, rank: int) -> None:
        self.seen.discard(rank)
        for kept in (self.timeouts, self.loose, self.unnamed, self.raised):
            kept.pop(rank, None)

    def place(self) -> None:
        """Each line that named no group joined to its rank's line that names the same work,
        else to the group other ranks' lines name for the same work; else, alone, in the world
        group, where the other ranks' works there lie close enough to be of one group; else
        (several), in groups the log does not name."""
        rest: dict[int, list[Timeout]] = {}
        lone: dict[int, list[Timeout]] = {}
        named: dict[tuple[int | None, str | None], str] = {}
        for rank, loose in self.loose.items():
            placed = self.timeouts.get(rank, {})
            for t in loose:
                same = next((p for p in placed.values() if t.seq is not None and p.seq == t.seq), None)
                if same is None:
                    rest.setdefault(rank, []).append(t)
                    continue
                _merge(same, t)
                named.setdefault((t.seq, t.op), same.group or WORLD_GROUP)
        for rank, loose in rest.items():
            placed = self.timeouts.setdefault(rank, {})
            if placed and all(t.seq is None and t.stuck is None for t in loose):
                continue  # the rank's watchdog fired: its numbered lines say on what
            guessed = {named.get((t.seq, t.op), WORLD_GROUP) for t in loose}
            if len({t.seq for t in loose if t.seq is not None}) > 1 or any(p.seq is not None for p in placed.values()):
                self.unnamed[rank] = loose
            else:
                group = guessed.pop() if len(guessed) == 1 else WORLD_GROUP
                world = group == WORLD_GROUP
                if world and group not in placed and all((t.seq, t.op) not in named for t in loose):
                    lone[rank] = loose
                into = placed.setdefault(group, Timeout(group, DEFAULT_PG if world else None, rank if world else None))
                for t in loose:
                    _merge(into, t)
            if not placed:
                del self.timeouts[rank]
        self.loose.clear()
        self._apart(lone)

    def _apart(self, lone: dict[int, list[Timeout]]) -> None:
        """Lone waits put in the world group for want of a name, whose works lie further apart
        than one group's can (:data:`MAX_SPREAD`: ``[Rank 0]`` at #96125, ``[Rank 7]`` at
        #64088), are of groups the log does not name: none of them is behind the others."""
        seqs = [t.seq for ts in self.timeouts.values() if (t := ts.get(WORLD_GROUP)) and t.seq is not None]
        if not lone or not seqs or max(seqs) - min(seqs) <= MAX_SPREAD:
            return
        for rank, loose in lone.items():
            del self.timeouts[rank][WORLD_GROUP]
            if not self.timeouts[rank]:
                del self.timeouts[rank]
            self.unnamed[rank] = loose

    @property
    def p2p_closed(self) -> list[tuple[int, StackFrame]]:
        """The peers whose connection closed under a rank's send or receive, each once, as the
        program's line named them, with that line's frame (:attr:`Raised.closed_peer`)."""
        found: dict[int, StackFrame] = {}
        for raised in self.exceptions:
            if (closed := raised.closed_peer) is not None:
                found.setdefault(*closed)
        return list(found.items())

    @property
    def mentioned(self) -> int | None:
        """The highest global rank a report of the log names (torch's desync report of the world
        group, Flight Recorder's analyzer's, the fingerprint check, a monitored barrier, Horovod, fairseq's norms,
        DeepSpeed's nodes, Ray's dead actors, the store's waits, a progress bar's own words, a launcher's rank, local
        rank, spawned process or srun task (a rank, or a node of one rank or more), whose number is below the
        world's size): the world has at least one more."""
        ranks = {*self.debug.ran, *self.debug.said, *self.debug.failed, *self.debug.unacked, *self.horovod.listed()}
        ranks.update(a.rank for a in self.ray.dead if a.rank is not None)
        ranks.update({*self.stores.waiting(), *self.stores.awaited(), *self.stores.barrier_ranks})
        ranks.update(r for report in self.desync.reports if report.of_world for r in report.listed())
        ranks.update(self.fr_trace.listed())
        ranks.update(self.grad_norms.norms)
        ranks.update(r for node in self.deepspeed.ranks.values() for r in node)
        if self.progress is not None and self.progress[0] is not None:
            ranks.add(self.progress[0])
        ranks.update(rank for rank, _ in self.p2p_closed)
        ranks.update(e.who for e in self.exits if e.unit in ON_A_NODE or e.unit == RANK)  # the world holds them
        return max((r for r in ranks if r < MAX_GROUP), default=None)

    def ended(self, rank: int) -> WorkerExit | None:
        """A launcher's word on how ``rank`` (a global rank) ended, its first."""
        return next((e for e in self.exits if e.unit == RANK and e.who == rank), None)

    @property
    def exceptions(self) -> list[Raised]:
        """Every exception the log shows, its rank's known or not."""
        return [*self.raised.values(), *self.unplaced]

    @property
    def largest_group(self) -> int | None:
        """The most ranks a group has, as its all-gathers' or reduce-scatters' element counts
        say: the world has at least as many."""
        return max((s for ts in self.timeouts.values() for t in ts.values() if (s := t.size())), default=None)

    @property
    def waiting(self) -> set[int]:
        """Ranks the log shows waiting: in a collective, or with their watchdog stuck."""
        busy = {r for r, ts in self.timeouts.items() if not all(t.idle for t in ts.values())}
        return busy | set(self.unnamed)

    def failed_or_waited(self) -> bool:
        """The log shows a rank or a worker failing or waiting."""
        return bool(self.raised or self.unplaced or self.timeouts or any(e.code not in (None, 0) for e in self.exits))

    def first_failure(self) -> str | None:
        """The first failure of its own the log shows, in words: an exception a rank raised, else a launcher's
        first observed failure, else the first worker it says ended badly."""
        own = sorted((r.at or 0.0, rank) for rank, r in self.raised.items() if r.own)
        if own:
            raised = self.raised[own[0][1]]
            return f"rank {own[0][1]} raised {raised.type}: {first_line(raised.message).split('. ')[0]}"
        ended = [e for e in self.exits if e.code not in (None, 0) and e.unit != WORKER]
        first = next((e for e in ended if e.first), ended[0] if ended else None)
        return f"{first.unit} {first.who} ended by {first.how}, as {first.by} says" if first is not None else None

    def cut(self, rank: int) -> bool:
        """The rank's traceback is in the log, cut before its exception line."""
        raised = self.raised.get(rank)
        return raised is not None and raised.cut

    def consequence(self, rank: int) -> bool:
        """The rank raised because another went first: its exception is no cause of its own."""
        raised = self.raised.get(rank)
        return raised is not None and raised.consequence

    def cut_beside(self) -> list[int]:
        """Ranks whose traceback the log holds, cut before its exception line, beside ranks waiting
        in a collective they are not in: a rank that raised while the others waited is the first to
        suspect, ahead of ranks of which the log says nothing."""
        waiting = self.waiting
        return sorted(r for r in self.raised if self.cut(r) and r not in waiting) if waiting else []

    def waited_at(self, rank: int) -> set[int]:
        """The numbers of the works the rank's own watchdog lines show it waiting in, whatever group."""
        placed = [t.seq for t in self.timeouts.get(rank, {}).values()]
        return {s for s in [*placed, *(t.seq for t in self.unnamed.get(rank, []))] if s is not None}

    @property
    def tasks_are_nodes(self) -> bool:
        """srun started a launcher on each node (its command line says so, or torchrun's agent speaks):
        its tasks are nodes, not ranks."""
        return self.agents_under_srun or any(e.by == "torchrun" for e in self.exits)

    def node_rank(self, local: int) -> int | None:
        """The global rank of local rank ``local`` on the one node whose processes announced their
        ranks (Lightning's ``GLOBAL_RANK``: a run of ranks, each once, not from rank 0), where it is one
        of them; None where the log does not place it."""
        ranks = sorted(self.announced)
        once = all(count == 1 for count in self.announced.values())
        if not ranks or ranks[0] == 0 or not once or ranks[-1] - ranks[0] + 1 != len(ranks) or local >= len(ranks):
            return None
        return ranks[0] + local

    @property
    def ran(self) -> bool:
        """Some rank had completed a collective: the job was past its set-up."""
        return any((t.seq or 0) > 1 or (t.completed or 0) > 0 for ts in self.timeouts.values() for t in ts.values())

    @property
    def timeouts_ms(self) -> list[int]:
        return [t.timeout_ms for ts in self.timeouts.values() for t in ts.values() if t.timeout_ms is not None]

    def last_words(self, rank: int, moment: float) -> ExceptionInfo | None:
        """The exception the rank raised, at its time in the log (at ``moment`` where the log
        gives none: ranks that raised without a stamp count as raising together); none for a stop."""
        raised = self.raised.get(rank)
        if raised is None or raised.stopped:
            return None  # a signal's handler raised it: the rank was stopped, it did not fail
        if raised.launcher is not None and any(r.own for r in self.raised.values()):
            return None  # a launcher's word beside a rank's own traceback: that one says what failed
        where = raised.frames[-1] if raised.frames else None
        at = raised.at if raised.at is not None else moment
        return ExceptionInfo(raised.type, raised.said, where, raised.frames, at)


def _merge(into: Timeout, loose: Timeout) -> None:
    into.op = into.op or loose.op
    into.ran = into.ran if into.ran is not None else loose.ran
    into.timeout_ms = into.timeout_ms or loose.timeout_ms
    into.numel = into.numel or loose.numel
    into.said_at = into.said_at if into.said_at is not None else loose.said_at
    into.seq = into.seq if into.seq is not None else loose.seq
    into.stuck = into.stuck if into.stuck is not None else loose.stuck
    into.enqueued = max(into.enqueued, loose.enqueued)
