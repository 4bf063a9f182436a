"""Who the files prove at fault, who they only point to, or that nobody is to blame.

The monitor names the first cause (:func:`~distmon.monitor.state.ending.first_cause`, as the
live header and ``distmon report`` pick it: a rank that raised before the peers it left
waiting). Of the ranks it names, the files prove those whose own lines or dump show them at
fault: a rank that raised beside another rank the log shows (waiting for it, going on, failing
otherwise: alone, it may have raised what every rank raised, the others' lines left out of the
paste, so it is suspected, told with its evidence; a GPU's hardware fault is proven alone too), a
rank whose own numbers stop short of its peers' or name another
op, a rank whose dump shows it behind, a rank whose dump is missing from a set of dumps (a
rank writes one unless killed). A rank a log does not show is not proven anything: a pasted
log is an excerpt. It is suspected, in order: a rank whose traceback the log holds, cut
before its exception line, while the others waited (it raised); a rank whose lines are in the
log but not a watchdog line (it was not waiting with the others); rank 0 (it most often works
alone while the others wait), unless rank 0's are the only lines and say it waited: then the
others first; then the others the log does not show. A rank that timed out waiting in c10d's
store waited for another: the rank it names, or the one still working, is suspected instead.

Sometimes nobody is to blame: every rank waits in the same collective, which all of them
issued (the transport, a GPU, NCCL); a group's first collective never completed, whichever of
its ranks the log shows (NCCL made its communicator only once every member had called it: the
ranks never reached each other, a set-up fault), but for the one rank missing beside two or more
waiting (its communicator made before, eagerly, it may never have called it); the timeout is set
absurdly low (the configuration); every rank's watchdog is stuck (a CUDA or NCCL call that never
returned). Then no rank is named."""

from __future__ import annotations

from dataclasses import dataclass, field

from distmon.flightrecorder.fields import ROOTED
from distmon.forensics.accounts import TRANSPORT, Accounts, accounts
from distmon.forensics.analysis import NO_FILE, NO_LINE, Analysis, a_nodes, silent_node, unseen
from distmon.forensics.failures import TOGETHER, device_fault, one_kind, shown_apart
from distmon.forensics.logfacts import STEP_CANCELLED, LogFacts
from distmon.forensics.mismatch import at_one_collective
from distmon.forensics.standings import P2P_OPS, waits_unplaced
from distmon.forensics.suspects import shown_why, unnamed_ends
from distmon.forensics.watchdog import DEFAULT_PG, WORLD_GROUP, own_device_error
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.ending import first_cause
from distmon.monitor.state.kinds import FAILURE_KINDS
from distmon.monitor.state.words import duration, first_line, group_name, in_flight, rank_word
from distmon.wire import GroupStatus

LOW_TIMEOUT_MS = 10_000
"""A collective timeout shorter than this is no job's setting but a mistake (``Timeout(ms)=1``):
any collective may take that long while a rank loads a batch."""
MAX_SUSPECTS = 1024
"""Suspects listed: beyond, the ranks a log does not show are a crowd, not a lead."""
SHORT_TIMEOUT_MS = 300_000
"""A collective timeout shorter than this is tripped by a rank's routine work alone (a
checkpoint, an evaluation): worth saying beside the ranks suspected."""
UNSEEN = (
    "the log shows no other rank waiting for it, going on without it or failing otherwise: every rank may have "
    "failed so, their lines left out of the paste"
)
"""Why a failure the log shows alone is suspected, not proven."""
NOTHING = "no rank was waiting in a collective or a send/recv when the files were written"
HABIT = (
    "rank 0 most often works alone while the others wait: saving a checkpoint, evaluating, "
    "preparing or downloading data"
)
WHOSE_GROUP = (
    "that rank where the group holds the job's ranks in order (one tensor-parallel group, as a serving engine makes), "
    "else the process with that place in the group"
)
"""Why a group's rank whose own GPU failed is suspected as the global rank of its number."""
NOT_DELIVERED = (
    "Check peer-to-peer between the GPUs (`nvidia-smi topo -p2p r`; NCCL_P2P_DISABLE=1 as a test), PCIe ACS and the "
    "IOMMU (ACS off, iommu=pt), the driver; across nodes, the interface NCCL uses (NCCL_SOCKET_IFNAME, NCCL_IB_HCA) "
    "and a firewall"
)
NEVER_CONNECTED = (
    "the group's first collective never completed: NCCL makes a group's communicator at its first collective, "
    "once every member has called it, so every rank issued it and none holds it up: the ranks never reached each "
    f"other, a set-up fault, not a rank. {NOT_DELIVERED}"
)
EAGER = (
    " (unless the job made its communicators at start, init_process_group(device_id=...): then a rank the log "
    "does not show may never have issued it)"
)
TORN_DOWN = (
    "the job's work had ended, so no rank held up another: its teardown hung in a CUDA or NCCL call (the process "
    "groups destroyed in another order on some ranks, an NCCL communicator's destroy or abort, a thread holding the "
    "GIL in a CUDA call at exit), not a rank"
)
STUCK = (
    "their watchdogs hung in a CUDA or NCCL call that never returned (the driver, a GPU, NCCL, or a "
    "thread holding the GIL in a CUDA call), not in a wait for another rank"
)


@dataclass
class Suspect:
    rank: int
    why: str

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "why": self.why}


@dataclass
class Blame:
    """Who the files prove at fault, who they only point to, or that nobody is to blame."""

    culprits: list[int]
    """The ranks the files prove at fault."""
    suspects: list[Suspect]
    """In order, the ranks absence or habit points to."""
    nobody: str | None
    """Where no rank is to blame: what the files point to instead."""
    headline: str
    cause: Alert | None
    """The monitor's first cause, where the verdict is its."""
    reported: dict[int, str] = field(default_factory=dict)
    """The culprits a report of the log names (torch's, Horovod's), each with its words."""
    accounted: bool = False
    """The verdict is the log's own accounts' (a report, the launchers, NCCL), not the monitor's
    rules on the waits."""
    alone: bool = False
    """The suspects' failure is the only one the log shows: told with its evidence, as a culprit's."""

    @property
    def leading(self) -> list[int]:
        """The suspects led with: the first, and those with its reason word for word (no line of theirs
        in the log, one of a node's ranks), whose order is their numbers', not a likelihood."""
        return leading(self.suspects)


def leading(suspects: list[Suspect]) -> list[int]:
    return [s.rank for s in suspects if s.why == suspects[0].why] if suspects else []


def assign_blame(analysis: Analysis) -> Blame:
    log = analysis.log
    first = first_cause(a for a in analysis.alerts if not cut_only(log, a))
    told = accounts(log, analysis.world)
    if told.named:
        return Blame(sorted(told.named), [], None, _named(told.named), None, told.named, accounted=True)
    if told.nobody is not None:
        return Blame([], [], told.nobody, f"nobody to blame: {told.nobody}", None, accounted=True)
    if first is not None and first.kind in FAILURE_KINDS and not all(log.consequence(r) for r in first.ranks):
        failed = set(first.ranks)
        placed = all(log.raised[r].launcher is None for r in failed if r in log.raised)  # a launcher speaks last
        if one_kind(log, failed) and not shown_apart(log, failed, after=placed) and not device_fault(log, failed):
            suspects = [Suspect(r, "its failure is the only one the log shows") for r in sorted(first.ranks)]
            return Blame([], suspects, None, f"{first.summary}; suspected, not proven: {UNSEEN}", first, alone=True)
        return Blame(sorted(first.ranks), [], None, first.summary, first)
    low = [ms for ms in log.timeouts_ms if ms < LOW_TIMEOUT_MS]
    if low and not told.suspects:  # where an account points to a rank, the timeout is no more than a hint
        why = (
            f"the collective timeout is {min(low)} ms (Timeout(ms)={min(low)}), far below what any collective "
            "may take: the configuration (init_process_group's timeout, or its unit), not a rank"
        )
        return Blame([], [], why, f"nobody to blame: {why}", first)
    if first is None or first.kind in FAILURE_KINDS:
        return _nothing(analysis, told, first)
    odd = at_one_collective(analysis)
    if odd is not None and odd.proven:
        said = dict.fromkeys(odd.ranks, odd.why)
        return Blame(odd.ranks, [], None, f"{rank_word(odd.ranks)} {odd.why}", None, said, accounted=True)
    cut = log.cut_beside()
    idle = _faulted(log)
    idle += [s for s in _idle(log) if all(s.rank != i.rank for i in idle)]
    if idle and odd is None and not cut and (not first.ranks or first.key == "hang:cycle"):
        return Blame([], idle, None, f"{_waiting(analysis, first) or first.summary}; suspected: {_lead(idle)}", first)
    if odd is None and not cut and (not first.ranks or _never_set_up(analysis) or _torn_down(log)):
        return _nobody(analysis, first)
    if odd is None and not cut and (undelivered := _undelivered(analysis, first.ranks)) is not None:
        return Blame([], [], undelivered, f"nobody to blame: {undelivered}", first)
    proven = _proven(analysis, [r for r in first.ranks if odd is None or r not in odd.ranks])
    suspects = _pointed(told, _suspects(analysis, [r for r in first.ranks if r not in proven]))
    raised = [Suspect(r, shown_why(log, r)) for r in cut if r not in proven]
    suspects = raised + [s for s in suspects if s.rank not in cut]
    if odd is not None:
        suspects = [Suspect(r, odd.why) for r in odd.ranks] + [s for s in suspects if s.rank not in odd.ranks]
    if proven:
        return Blame(proven, suspects, None, first.summary + _short(log), first)
    more = {s.rank: s.why for s in suspects}
    idle = [Suspect(i.rank, f"{i.why}; and {more[i.rank]}" if i.rank in more else i.why) for i in idle]
    idle.sort(key=lambda s: s.rank not in more)  # the alert's own suspects first
    suspects = idle + [s for s in suspects if all(s.rank != i.rank for i in idle)]
    waiting = _waiting(analysis) or first.summary
    if not suspects:
        return Blame([], [], None, f"{waiting}; the log does not show whom they wait for{_short(log)}", first)
    headline = f"{waiting}; suspected: {_lead(suspects)}{_short(log)}"
    return Blame([], suspects, None, headline, first)


def _lead(suspects: list[Suspect]) -> str:
    """The suspects led with (:func:`leading`), and why."""
    alike = leading(suspects)
    return f"{rank_word(alike)}{NO_ORDER if len(alike) > 1 else ''} ({suspects[0].why})"


NO_ORDER = ", none more than another"
"""Said of suspects led with together."""


def _pointed(told: Accounts, suspects: list[Suspect]) -> list[Suspect]:
    """The suspects an account points to (a lost peer's host, a killed local rank) first."""
    first = [Suspect(r, why) for r, why in told.suspects if any(s.rank == r for s in suspects)]
    return first + [s for s in suspects if all(f.rank != s.rank for f in first)]


def _named(named: dict[int, str]) -> str:
    """``rank 7 finished collective #182 and never started #183, ...``: the ranks a report
    names, those with the same words together."""
    by_why: dict[str, list[int]] = {}
    for rank, why in sorted(named.items()):
        by_why.setdefault(why, []).append(rank)
    return "; ".join(f"{rank_word(ranks)} {why}" for why, ranks in by_why.items())


def cut_only(log: LogFacts, alert: Alert) -> bool:
    """A failure the log shows only by tracebacks cut before their exception lines: the ranks
    raised, but what, and whether before the others, is in the part of the log the paste left
    out. They are suspected (:func:`_silent`), not proven: the verdict names them itself (first
    beside ranks that wait), so it stands for the alert."""
    return alert.kind in FAILURE_KINDS and bool(alert.ranks) and all(log.cut(r) for r in alert.ranks)


def _nothing(analysis: Analysis, told: Accounts, first: Alert | None) -> Blame:
    """What a log that shows no wait and no failure of a placed rank says: where only
    ranks that lost a peer raised, the peer is one the log does not show waiting."""
    log = analysis.log
    said = []
    if log.unplaced_said:
        said.append(
            f"the watchdog's lines name no global rank ({'; '.join(s.unplaced for s in log.unplaced_said[:3])})"
        )
    primary = [r for r in log.unplaced if not r.consequence and not r.stopped]  # a launcher's own stop is none
    if primary:
        said.append(f"a process the log does not name raised {primary[0].type}: {first_line(primary[0].message)}")
    stored = _stored(log)
    waiters = log.stores.waiting()  # a waiter's traceback, cut or not, is its wait
    consequences = sorted(r for r in log.raised if log.consequence(r) and r not in log.debug.ran and r not in waiters)
    peers = log.peers.peers()
    lost = f" ({', '.join(f'connection closed by {p}' for p in peers[:2])})" if peers else ""
    if stored:
        said.append(stored)
    if (store_lost := log.stores.lost_said()) is not None:
        said.append(store_lost)
    if consequences:
        said.append(f"{rank_word(consequences)} raised because a peer was lost{lost}")
    elif peers:
        said.append(f"a transport lost its peer{lost}")
    if log.debug.disagreeing():
        said.append(f"{rank_word(log.debug.disagreeing())} ran different collectives")
    said += unnamed_ends(log) + log.stacks.unnamed()
    if log.cancelled == STEP_CANCELLED and not log.cancelled_after:
        said.append("Slurm cancelled a step and gave no reason: scancel, or srun ending its tasks after one failed")
    said += log.ray.unnamed()[:1]
    suspects = [
        Suspect(r, shown_why(log, r)) for r in sorted(log.raised) if log.cut(r) and r not in {*waiters, *consequences}
    ]
    if placeless := waits_unplaced(log):  # a rank shown not waiting with them is suspected first; then the unseen
        said.append(placeless)
        suspects += [Suspect(r, shown_why(log, r)) for r in sorted(log.seen - log.waiting - set(log.raised))]
        unseen = sorted(set(range(analysis.world)) - log.seen - set(log.raised) - log.waiting)
        passing = any(t.op in P2P_OPS for ts in log.timeouts.values() for t in ts.values())  # a pipeline's stages
        suspects += [Suspect(r, NO_LINE) for r in unseen] if passing and len(unseen) < analysis.world else []
    suspects += [Suspect(r, why) for r, why in told.suspects if all(s.rank != r for s in suspects)]
    if primary and not suspects and (on := primary[0].oom_device) is not None:
        suspects.append(
            Suspect(
                on,
                f"its process ran out of memory on GPU {on}: local rank {on}, where each process "
                "has its own GPU (the rank, where the job runs on one node)",
            )
        )
    if not suspects and not log.seen and (own := own_device_error(log.unplaced_said)) is not None:
        assert own.local is not None, "own_device_error names a group's rank"
        why = f"its own GPU's error ended its watchdog as rank {own.local} of group {own.group}; {WHOSE_GROUP}"
        suspects.append(Suspect(own.local, why))
    if stored and not suspects and 0 not in waiters and not log.stores.in_subgroups():
        suspects.append(Suspect(0, f"{NO_LINE}; {HABIT}"))
    if consequences or peers or stored:
        shown = log.seen | log.stores.waiting() | log.stores.barrier_ranks
        bound = log.stores.roots_at_most() if stored else None  # a group's root is no higher than its waiter
        within = range(analysis.world if bound is None else min(bound + 1, analysis.world))
        gone = [r for r in within if r not in shown and all(s.rank != r for s in suspects)]
        why = f"no line in the log: the peer lost is one the log does not show{lost}" if not stored else NO_LINE
        suspects += [Suspect(r, why) for r in gone]
        if consequences and not gone:
            quiet = [r for r in within if r in log.seen and _went(log, r) and all(s.rank != r for s in suspects)]
            suspects += [Suspect(r, f"{WENT}{lost}") for r in quiet]
    if suspects:
        headline = "; ".join(said) + "; " if said else ""
        return Blame([], suspects[:MAX_SUSPECTS], None, f"{headline}suspected: {_lead(suspects)}", first)
    if said:
        return Blame([], [], None, "; ".join(said) + ("" if not consequences else ", and no line says which"), first)
    return Blame(
        [],
        [],
        None,
        NOTHING
        if analysis.ranks
        else "nothing to judge: no dump, and no line of the log names a rank that waited, failed or was reported",
        first,
    )


def _faulted(log: LogFacts) -> list[Suspect]:
    """Ranks whose GPU the driver's Xid lines say failed (:mod:`~distmon.forensics.xids`)."""
    return [Suspect(rank, why) for rank, why in log.xids.suspected(log.nccl)]


def _idle(log: LogFacts) -> list[Suspect]:
    """Ranks whose own watchdog lines say nothing of theirs is in flight (torch 2.6's dump signal, of the world
    group) while others wait in collectives: those they wait for, which groups they share the log may not say."""
    idle = sorted(r for r, ts in log.timeouts.items() if ts and all(t.idle for t in ts.values()))
    waiting = rank_word(sorted(log.waiting)) if log.waiting else ""
    why = f"nothing in flight, as its own watchdog's line says, while {waiting} wait: {IDLE}"
    return [Suspect(r, why) for r in idle] if waiting else []


IDLE = "in its own code, the rank their collectives wait for (which groups it shares with them, the log does not say)"
WENT = "its lines show it neither failed nor waited: the peer the others lost, gone of its own, its exit not in the log"


def _went(log: LogFacts, rank: int) -> bool:
    """A rank whose lines show no failure, no wait, and no launcher's word on its end."""
    return rank not in log.raised and rank not in log.waiting and log.ended(rank) is None


def _stored(log: LogFacts) -> str | None:
    """``rank 1 timed out waiting in c10d's store for another rank``, where a rank's (or an
    unnamed process's) wait in the store, or in a barrier whose block the main process runs
    first, timed out: a victim of the rank it waited for."""
    stores = log.stores
    waiters = sorted(stores.waiters())
    if waiters:
        return f"{rank_word(waiters)} timed out waiting in c10d's store for another rank"
    if stores.waits:
        return "a process timed out waiting in c10d's store for another rank"
    if stores.main_first:
        rank, context = stores.main_first[0]
        who = rank_word([rank]) if rank is not None else "a process"
        return f"{who} waited in a barrier inside {context} for the main process"
    short = stores.short()
    if short is not None:
        size, count, key = short
        shown = sorted(stores.barrier_ranks)
        return f"{rank_word(shown)} timed out in the store-based barrier of {key}: {count} of {size} ranks reached it"
    return None


def _proven(analysis: Analysis, ranks: list[int]) -> list[int]:
    """Of ``ranks`` (those an alert names), the ones their own dump or lines show at fault; else the one whose dump
    is missing from a set (the culprit often writes none). Not one whose file is there but unreadable (it was
    alive to write it), nor a missing one beside a rank its own dump shows at fault (what the other did, no file
    says), nor several missing that may be a node's (its files not gathered: torch writes each rank's on its own
    node), nor one missing where a log, not a dump, tells of other ranks."""
    shown = [r for r in ranks if (f := analysis.ranks.get(r)) is not None and (f.dump is not None or bool(f.groups))]
    absent = sorted(r for r in ranks if r not in analysis.ranks and analysis.missing.get(r) == NO_FILE)
    dumped = sum(1 for f in analysis.ranks.values() if f.dump is not None)  # all but them: a set of dumps
    if shown or dumped != analysis.world - len(absent):
        return sorted(shown)
    return absent if len(absent) == 1 or not a_nodes(absent, analysis.world) else []


def _nobody(analysis: Analysis, first: Alert) -> Blame:
    """Every rank waits in the same collective, or every rank's watchdog is stuck; but where some
    ranks' watchdogs alone are stuck beside the others' numbered waits, those are suspected: that a
    stuck one issued the collective, no line shows, and its hang is its own GPU's or driver's."""
    log = analysis.log
    alone = [r for r, ts in log.timeouts.items() if all(t.seq is None and t.stuck is not None for t in ts.values())]
    if alone and len(alone) < len(log.timeouts) and not log.finished:
        why = f"its watchdog alone got stuck while {rank_word(sorted(set(log.timeouts) - set(alone)))} waited: {STUCK}"
        suspects = [Suspect(r, why.replace("their watchdogs", "its watchdog")) for r in sorted(alone)]
        return Blame([], suspects, None, f"{_waiting(analysis) or first.summary}; suspected: {_lead(suspects)}", first)
    stuck = bool(log.timeouts) and all(
        t.seq is None and t.stuck is not None for ts in log.timeouts.values() for t in ts.values()
    )
    said = [t.said_at for ts in log.timeouts.values() for t in ts.values() if t.said_at is not None]
    spread = max(said) - min(said) if said else None
    together = ""
    if spread is not None and spread <= TOGETHER and len(log.waiting) > 1:
        together = f", within {duration(spread)} of each other" if spread >= 0.1 else ", at once"
    caveat = ""
    if analysis.world_from == "the highest rank seen":
        caveat = (
            f" (unless the job has more than the {analysis.world} ranks the log shows: one of those would be the one)"
        )
    if stuck and log.finished:
        why = f"{_waiting(analysis) or 'a rank waits with its watchdog stuck'}{together}: {TORN_DOWN}"
    elif stuck:
        why = f"every rank's watchdog got stuck{together}: {STUCK}{caveat}"
    elif _first_collective(analysis):
        eager = EAGER if first.ranks else ""
        shm = "; NCCL's lines show shared memory (SHM) among its transports: /dev/shm's size (a container's is 64 MB)"
        why = f"{_waiting(analysis)}{together}: {NEVER_CONNECTED}{shm if log.nccl.shm else ''}{eager}"
    else:
        why = f"{_waiting(analysis, first) or 'every rank waits in the same collective'}{together}: {TRANSPORT}{caveat}"
    return Blame([], [], why, f"nobody to blame: {why}", first)


def _torn_down(log: LogFacts) -> bool:
    """The job's work had ended (:attr:`LogFacts.finished`), and the only waits the log shows are
    watchdogs stuck, none in a numbered collective: the teardown hung, no rank held up another."""
    waits = [t for ts in log.timeouts.values() for t in ts.values()]
    return log.finished and bool(waits) and all(t.seq is None and t.stuck is not None for t in waits)


def _never_set_up(analysis: Analysis) -> bool:
    """A log (no dumps, whose absent ranks would be evidence) whose ranks all wait in their
    group's first collective, none completed: whichever ranks it shows, NCCL made the group's
    communicator only once every member called that collective. Not sends and receives, whose
    pairs' communicators and order are the program's; but a batch of them (``COALESCED``,
    ``batch_isend_irecv``) runs on the group's own communicator, as a collective does (torch's
    ``isP2POp`` is false for a batch)."""
    waits = [g for f in analysis.ranks.values() for g in f.groups if in_flight(g)]
    return (
        not analysis.dumps
        and not analysis.log.unnamed
        and _first_collective(analysis)
        and all(g.op not in P2P_OPS for g in waits)
        and _one_absent(analysis) is None
    )


def _one_absent(analysis: Analysis) -> int | None:
    """The one rank of the world a log of two waiting ranks or more does not show, where every
    rank it shows waits: it may never have called the group's first collective (busy alone,
    where its communicator was made before it, eagerly), so it is suspected, not cleared."""
    log = analysis.log
    absent = set(range(analysis.world)) - log.seen
    return absent.pop() if len(absent) == 1 and len(log.waiting) >= 2 and log.waiting == log.seen else None


def _undelivered(analysis: Analysis, ranks: list[int]) -> str | None:
    """Where each rank named waits in its group's first collective (not a send or a receive),
    which a peer in that group completed: the peer joined it, so what the collective carried to
    the rank never arrived, on the connections NCCL made at that collective. The transport's
    set-up, in words; None otherwise."""
    if not ranks or analysis.dumps:
        return None
    waits = {}
    for rank in ranks:
        f = analysis.ranks.get(rank)
        first = [g for g in f.groups if in_flight(g) and g.completed <= 0 and g.op and g.op not in P2P_OPS] if f else []
        if not first:
            return None
        waits[rank] = first[0]
    ids = {g.id for g in waits.values()}
    past = sorted(
        f.rank
        for f in analysis.ranks.values()
        if f.rank not in waits and any(g.id in ids and g.completed >= 1 for g in f.groups)
    )
    if not past:
        return None
    g = next(iter(waits.values()))
    one = len(waits) == 1
    return (
        f"{rank_word(sorted(waits))} {'waits' if one else 'wait'} in collective #1 ({g.op}) of {group_name(g.id, g)}, "
        f"the group's first, which {rank_word(past)} completed: what it carried never reached "
        f"{'it' if one else 'them'}, on the connections NCCL makes at a group's first collective: a set-up fault, not "
        f"a rank. {NOT_DELIVERED}"
    )


def _first_collective(analysis: Analysis) -> bool:
    """Every rank waits in its group's first collective and completed none: they never
    exchanged anything. A watchdog line that gives no number (torch 1.10 and older, a message
    a person elided) does not say it was the first; beside a peer's line that numbers the
    group's first, it waits in it too (no member completed it)."""
    waits = [(f.rank, g) for f in analysis.ranks.values() for g in f.groups if in_flight(g)]
    timeouts = analysis.log.timeouts
    numbered = {g.id for r, g in waits if (t := timeouts.get(r, {}).get(g.id)) is None or t.seq is not None}
    named = {g.id for _, g in waits if g.op}  # a line of the group's numbers alone names no op; another may
    return bool(waits) and all(g.completed <= 0 and g.id in named and g.id in numbered for _, g in waits)


def _waiting(analysis: Analysis, first: Alert | None = None) -> str | None:
    """The wait most ranks are in (the group's of ``first``, a collective that does not complete, where it is
    one of them; of as many, the oldest), in words: ``ranks 1-3 wait in collective #N (op) of group G for
    10m00s``."""
    places: dict[tuple[str, int], tuple[GroupStatus, list[int], float]] = {}
    for f in analysis.ranks.values():
        for g in f.groups:
            if in_flight(g) and g.since is not None:
                key = (g.id, g.completed + 1)
                sample, ranks, since = places.get(key, (g, [], g.since))
                places[key] = (sample if sample.op else g, [*ranks, f.rank], min(since, g.since))
    if not places:
        return None
    stuck = first.key.removeprefix("hang:") if first is not None else None
    (gid, seq), (g, ranks, since) = max(
        places.items(), key=lambda item: (item[0][0] == stuck, len(item[1][1]), -item[1][2])
    )
    verb = "waits" if len(ranks) == 1 else "wait"
    said = [analysis.log.timeouts.get(r, {}).get(gid) for r in ranks]
    if all(t is not None and t.seq is None and t.stuck is not None for t in said):
        what = f"with the watchdog stuck in {group_name(gid, g)}"
    else:
        numbered = analysis.dumps or any(t is None or t.seq is not None for t in said)
        if numbered:
            what = f"in collective #{seq}" + (f" ({g.op})" if g.op else "")
        else:
            what = f"in {g.op or 'a collective'} (its number not in the log)"
        what += f" of {group_name(gid, g)}"
    stated = analysis.dumps or any(t is not None and (t.ran is not None or t.stuck) for t in said)
    waited = f" for {duration(analysis.t - since)}" if stated else ""
    return f"{rank_word(ranks)} {verb} {what}{waited}"


def _suspects(analysis: Analysis, unproven: list[int]) -> list[Suspect]:
    """The ranks a log leaves unproven, most likely first: one whose lines are in the log but
    not a watchdog line; rank 0 alone in a collective nobody else shows, or rank 0 absent;
    the one rank an exception the log places nowhere can be; the others absent."""
    log = analysis.log
    unproven = [r for r in unproven if r not in log.waiting]
    seen = [r for r in unproven if r in log.seen and r not in log.cut_in]
    found = [Suspect(r, shown_why(log, r)) for r in sorted(seen, key=lambda r: not log.cut(r))]
    alone = _alone(analysis)
    if alone is not None and alone[1]:
        found.insert(0, alone[0])
    absent = [r for r in unproven if r not in log.seen and r not in log.cut_in]
    found += _unplaced_owners(analysis, absent)
    if 0 in absent and all(s.rank != 0 for s in found) and not _subgroups_only(analysis):
        found.append(Suspect(0, silent_node(log, 0) or f"no line in the log; {_source(analysis)}{HABIT}"))
    found += [Suspect(r, unseen(analysis, r)) for r in absent if all(s.rank != r for s in found)]
    if alone is not None and not alone[1]:
        found.append(alone[0])
    return found[:MAX_SUSPECTS]


def _subgroups_only(analysis: Analysis) -> bool:
    """Every wait the log shows is in another group than the world's (a tensor- or pipeline-parallel
    one): rank 0 has no part in it that another rank lacks."""
    groups = [g for f in analysis.ranks.values() for g in f.groups if in_flight(g)]
    return bool(groups) and all(g.id != WORLD_GROUP and g.desc != DEFAULT_PG for g in groups)


def _alone(analysis: Analysis) -> tuple[Suspect, bool] | None:
    """Rank 0 the only rank the log shows, waiting in a collective. It waited: the others are
    suspected first, unless its lines say it is alone in that collective, which the others
    never issued (one only rank 0 calls: a gather inside ``state_dict()`` while saving, a
    barrier after the training loop ended): the world has more than two ranks, yet none of the
    others, which would wait and time out with it behind one lagging rank, printed a line; or
    the training loop had ended, the others gone; or the main process's own work holds its wait
    (:mod:`~distmon.forensics.main_only`). A rank 0 that went on enqueuing work after the one it waits
    in was in its ordinary loop: not alone, and not suspected. With it, whether it comes first."""
    log = analysis.log
    if log.seen != {0} or log.waiting != {0} or _went_on(log, 0):
        return None
    known = not analysis.world_from.startswith(("the highest rank seen", "the log (a rank waits"))
    if (work := log.main_only.words()) is not None:
        return Suspect(0, f"{ALONE}; {work}"), True
    first = log.finished or (analysis.world > 2 and known)
    return Suspect(0, ALONE if first else f"{ALONE}; it waited, so the others come first"), first


ALONE = (
    "alone in that collective: no other rank's line shows it; if the log is whole, the others never issued it: "
    "a collective only rank 0 calls (a gather inside state_dict() while saving, a metric it logs alone)"
)


def _went_on(log: LogFacts, rank: int) -> bool:
    """The rank enqueued work after the one it waits in: its host was in its ordinary loop."""
    return any(t.seq is not None and t.enqueued > t.seq for t in log.timeouts.get(rank, {}).values())


def _unplaced_owners(analysis: Analysis, absent: list[int]) -> list[Suspect]:
    """An exception the log shows with no rank, not a lost peer's: likely one of the ranks absent's."""
    raised = next((r for r in analysis.log.unplaced if not r.cut and not r.consequence), None)
    if raised is None or not absent or len(absent) > MAX_SUSPECTS:
        return []
    which = f"rank {absent[0]} is the only one" if len(absent) == 1 else f"{rank_word(absent)} are the ones"
    said = f"the log shows {raised.type}: {first_line(raised.message)} raised with no rank, and {which} it does not"
    return [Suspect(r, f"{said} show waiting") for r in absent]


def _source(analysis: Analysis) -> str:
    """``the usual root of the broadcast the others wait in; `` where the wait has a root."""
    ops = {g.op for f in analysis.ranks.values() for g in f.groups if g.op and in_flight(g)}
    rooted = sorted(ops & set(ROOTED))
    return f"the usual root of the {rooted[0]} the others wait in; " if rooted else ""


def _short(log: LogFacts) -> str:
    """``; the collective timeout is 1m00s, ...`` where it is short enough for one rank's
    routine work alone (a checkpoint, an evaluation) to trip it."""
    shortest = min(log.timeouts_ms, default=None)
    if shortest is None or shortest >= SHORT_TIMEOUT_MS:
        return ""
    return (
        f"; the collective timeout is {duration(shortest / 1000)}, short enough that a rank saving a checkpoint "
        "or evaluating alone trips it: raise it (init_process_group's timeout)"
    )
