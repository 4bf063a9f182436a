"""``hang`` and ``divergence`` in a job found from outside (``--find``, ``distmon look``): read
off where the ranks' stacks stand.

A rank found with no hook counts no steps and no sequence numbers: its node's eye reports its
training thread's stack and since when that stack has stood still (:mod:`distmon.node.found_ranks`).
Ranks of one job that wait for the same thing stand at the same frames and do nothing; the
one holding them up stands elsewhere. So, among the found ranks:

- ranks standing still in a collective, a send or receive, or ``init_process_group`` wait on
  their peers; the ranks standing elsewhere (asleep, stopped, holding the GIL, waiting on
  their DataLoader, or working) are the roots, named early when seen doing nothing, as the
  hang rule names them (:mod:`~distmon.monitor.rules.hang`);
- every rank waiting, in sends and receives whose peers wait on them in turn: a deadlock;
- every rank waiting, in different collectives (a barrier only some issued): the few in the
  odd one diverged, named with both places;
- every rank waiting in the same collective, long: it does not complete, and no rank causes
  it (the network, the communicator).

The incidents are the hang's facts, in its words (:mod:`~distmon.monitor.rules.hang_words`):
where the hook's alert says "collective #36 (all_reduce) of group 0", this one says
"all_reduce at train.py:312 in step". A job's pace is not seen from outside, so its waits are
judged by the thresholds' floors (:meth:`~distmon.monitor.state.limits.Thresholds.hang_after`
of no step time). Mixed jobs, where a rank that attached the hook reports sequence numbers,
are the hang rule's while any collective is in flight by them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.outside.verdicts import Verdict
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.hang import observe
from distmon.monitor.rules.hang_words import (
    Deadlock,
    Hang,
    InRing,
    Root,
    StuckCollective,
    Unseen,
    WaitedIn,
    WaitLine,
    deadlock_words,
    hang_words,
    stuck_collective_words,
    unseen_words,
)
from distmon.monitor.rules.process import (
    Look,
    all_working,
    doing_nothing,
    keep_looking,
    look_at,
    said,
)
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.columns import I8
from distmon.monitor.state.kinds import AlertKind, Doing
from distmon.monitor.state.whereabouts import Place, classify, user_frame
from distmon.monitor.state.words import duration, rank_word, reach_line, stack_lines, where
from distmon.node.torch_frames import c10d_op, waits_on_peers
from distmon.wire import ANY_SOURCE, StackFrame

MAX_SHOWN = 4
RAN_ON = 5.0
"""Seconds the others must run on after a found rank's process ended for it to be named."""
SYNC_POINT = "a sync point (on a GPU, where a rank waits for its collective)"
ENDED = (Doing.GONE, Doing.ZOMBIE)
"""A root whose process has ended: not the hang's to name. Seen from outside, a job's processes
end in no telling order: rank 0 seen gone a moment before its peers, whose eye still shows them
where they last stood, is a job ending; ``found_gone`` names a rank the others ran on without."""
THE_JOB = "the job"
"""The group a collective seen from outside is waited in: its stack names no group."""


@dataclass(frozen=True)
class _Stood:
    """A found rank whose stack stands still where it waits on peers."""

    rank: int
    age: float
    place: WaitedIn


def found_hang(job: JobState, ctx: Context) -> list[Finding]:
    c, now = job.cols, ctx.now
    live = job.live(now)
    found = live & job.found()
    if not found.any() or (c.in_collective | c.in_p2p)[live].any():
        return []
    ranks = np.flatnonzero(found)
    places = _places(job, ranks)
    in_calls = {rank for rank in ranks.tolist() if waits_on_peers(job.report_of(rank).stack)}
    synced = _at_a_sync_point(job, ctx, places, [r for r in ranks.tolist() if r not in in_calls])
    at_peers = in_calls | synced.keys()
    waiting = [
        _Stood(rank, age, _waited_in(job, rank, places[rank])) for rank, age in _stood(job, ctx, sorted(in_calls))
    ]
    waiting += [_Stood(rank, age, _waited_in(job, rank, places[rank], True)) for rank, age in sorted(synced.items())]
    early, hang = _thresholds(ctx, waiting)
    _remember(ctx, waiting, hang)
    if not waiting or max(w.age for w in waiting) < min(hang, early / 2):
        return []
    unseen = sorted(set(range(job.world)) - set(job.ranks))
    roots = [rank for rank in ranks.tolist() if rank not in at_peers]
    if roots:
        astir = any(_new_there(job, rank) for rank in at_peers)
        return _hang(job, ctx, roots, waiting, early, hang, tuple(unseen), astir)
    if len(waiting) < len(at_peers):
        return []  # some ranks at a collective still move, or work there: not stuck yet
    ring = _ring(waiting)
    if ring:
        return [_deadlock(job, ctx, ring, waiting)]
    if unseen:  # whom they wait for is not seen: named by nobody
        waited = max(w.age for w in waiting)
        if waited < hang or ctx.behind is not None or job.told.found_since(ctx.now - hang).intersection(unseen):
            return []  # not yet: a node reached found some of them, and their reports are on their way
        return [_unseen(job, unseen, waiting)]
    by_place = _by_place(waiting)
    if len(by_place) > 1 and min(w.age for w in waiting) >= early:
        return [_divergence(job, ctx, by_place)]
    gone = (job.found() & job.flagged(wire.FLAG_EXITED)).any()  # they wait for it: found_gone names it
    if len(by_place) == 1 and max(w.age for w in waiting) >= hang and not gone:
        return [_stuck(waiting)]
    return []


def _remember(ctx: Context, waiting: list[_Stood], hang_after: float) -> None:
    """The ranks standing in a wait at their peers now, in the detector's memory; those seen so
    a hang threshold ago or more, out of it."""
    seen = ctx.seen_waiting
    seen.update((w.rank, ctx.now) for w in waiting)
    for rank in [rank for rank, last in seen.items() if ctx.now - last >= hang_after]:
        del seen[rank]


def _moved_on(ctx: Context, ranks: list[int], waited: float, hang_after: float) -> set[int]:
    """Of ``ranks``, those seen standing in a wait at their peers since the oldest of these waits
    began, less than the hang threshold ago: the rank they waited for moved on, and they catch
    up (as :meth:`JobState.freed` tells of hooked ranks); an eye seconds behind still shows others
    in the wait."""
    within = min(hang_after, waited)
    return {rank for rank in ranks if ctx.now - ctx.seen_waiting.get(rank, -np.inf) < within}


def _thresholds(ctx: Context, waiting: list[_Stood]) -> tuple[float, float]:
    """When a wait names the rank it waits for early, and when it is a hang. A job's pace is
    not seen from outside: its floors; but ranks that all wait to join the job (in
    ``init_process_group``) wait for a slow start as the stall rule lets a hooked job's do."""
    limits = ctx.limits
    if waiting and all(w.place.op == "init_process_group" for w in waiting):
        return limits.init_wait, limits.hang_after(None, ctx.interval)
    return limits.early_after(0.0), limits.hang_after(0.0, ctx.interval)


def _stood(job: JobState, ctx: Context, ranks: list[int]) -> list[tuple[int, float]]:
    """Of ``ranks``, those standing still (no progress seen from outside), each with how long."""
    if not ranks:
        return []
    mine = np.array(ranks, dtype=np.int64)
    still = mine[job.flagged(wire.FLAG_STALLED, mine)]
    ages = job.ages(job.cols.stalled_since[still], ctx.now, still)
    return list(zip(still.tolist(), ages.tolist(), strict=True))


def _places(job: JobState, ranks: I8) -> dict[int, Place | None]:
    """Each rank's place (None where its stack could not be taken), one stack classified per
    distinct stack."""
    hashes = job.cols.stack[ranks]
    kinds: dict[int, Place | None] = {0: None}
    out = {}
    for rank, h in zip(ranks.tolist(), hashes.tolist(), strict=True):
        if h not in kinds:
            kinds[h] = classify(job.report_of(rank).stack)
        out[rank] = kinds[h]
    return out


def _at_a_sync_point(
    job: JobState, ctx: Context, places: dict[int, Place | None], ranks: list[int]
) -> dict[int, float]:
    """Of ``ranks`` (found, not inside ``torch.distributed``), those that wait for their peers
    at a sync point, as ranks do on a GPU (a collective returns at once; the rank blocks later,
    in ``loss.item()``, a copy to the CPU, a kernel launch once the queue is full, often
    spinning, busy, with the GIL held): most of them, two at least, standing at one line of
    their code, while another of them stands elsewhere. With how long each has stood there."""
    at: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for rank in ranks:
        place, outside = places.get(rank), job.report_of(rank).outside
        frame = place.user if place is not None else None
        if frame is not None and outside is not None and outside.stood_since is not None:
            at[(frame.file, frame.line)][rank] = job.ranks[rank].age(outside.stood_since, ctx.now)
    most = max(at.values(), key=len, default={})
    return most if len(most) >= 2 and 2 * len(most) > len(ranks) and len(most) < len(ranks) else {}


def _waited_in(job: JobState, rank: int, place: Place | None, synced: bool = False) -> WaitedIn:
    """What a found rank's stack stands in: its op (the innermost ``torch.distributed`` call, or
    the sync point where it waits for one), where its code called it, and the peer a send or
    receive names."""
    r = job.report_of(rank)
    frames = r.stack or []
    assert place is not None
    if synced:
        return WaitedIn(THE_JOB, op=SYNC_POINT, at=place.user, rank=rank)
    op = "init_process_group" if place.kind == Doing.INIT else None
    op = op or c10d_op(frames)
    if op is None:  # no torch.distributed call of its own: DDP's reducer, a pipeline library's sends
        ops = {"init": "init_process_group", "collective": "backward (DDP's gradient all-reduce)"}
        op = ops.get(place.kind) or place.words.removeprefix("in ")
    peer = r.outside.peer if r.outside is not None and place.kind == Doing.P2P else None
    at = place.user or _innermost(frames)
    return WaitedIn(THE_JOB, op=op, at=at, peer=peer, rank=rank)


def _innermost(frames: list[StackFrame]) -> StackFrame | None:
    return user_frame(frames) or (frames[-1] if frames else None)


def _by_place(waiting: Iterable[_Stood]) -> dict[tuple[str | None, str, int], list[_Stood]]:
    """The waiting ranks by the collective they stand in and where their code called it, the
    most first. Sends and receives are one place: their peers differ by rank."""
    places: dict[tuple[str | None, str, int], list[_Stood]] = defaultdict(list)
    for w in waiting:
        at = w.place.at
        key = ("p2p" if w.place.peer is not None else w.place.op, at.file if at else "", at.line if at else 0)
        places[key].append(w)
    return dict(sorted(places.items(), key=lambda item: (-len(item[1]), item[1][0].rank)))


def _lines(waiting: list[_Stood], awaited: tuple[int, ...]) -> list[WaitLine]:
    lines = []
    for group in _by_place(waiting).values():
        ranks = np.array(sorted(w.rank for w in group), dtype=np.int64)
        peers = {w.place.peer for w in group}
        place = group[0].place if len(peers) == 1 else WaitedIn(THE_JOB, op=group[0].place.op, at=group[0].place.at)
        lines.append(WaitLine(max(w.age for w in group), ranks, place, awaited))
    return lines


def _hang(
    job: JobState,
    ctx: Context,
    roots: list[int],
    waiting: list[_Stood],
    early_after: float,
    hang_after: float,
    unseen: tuple[int, ...],
    astir: bool,
) -> list[Finding]:
    """Ranks stand still waiting on peers while ``roots`` stand elsewhere: before ``hang_after``,
    named as a warning once each is seen doing nothing for a second; after, with what their
    processes do (working: a warning). ``astir``: a rank at its peers has only just come there."""
    waited = max(w.age for w in waiting)
    views = [job.ranks.get(rank) for rank in roots[:MAX_SHOWN]]
    early = waited < hang_after
    moved_on = _moved_on(ctx, roots, waited, hang_after)
    habit = None
    if early:
        if len(roots) > MAX_SHOWN:
            return []
        seen = [doing_nothing(s, ctx, waited) if s is not None and not s.finished else None for s in views]
        if observe(job, ctx, roots, waited, dict(zip(roots, seen, strict=False)), lambda: True) is not None:
            return []  # a pause the job usually takes: it outlasts itself only past the hang threshold
        if any(v is None for v in seen) or waited < early_after:
            for s in views:  # its eye goes on looking, to judge it as soon as it can
                if s is not None:
                    keep_looking(s, ctx)
            return []
        looks = {
            rank: _early_look(s, verdict, ctx, waited) for rank, s, verdict in zip(roots, views, seen, strict=True)
        }
        roots, looks = _holding_up(job, roots, looks, astir, moved_on)
        if not roots:
            return []
    else:
        looks = {
            rank: _root_look(s, ctx, waited) if s is not None else Look(None)
            for rank, s in zip(roots, views, strict=False)
        }
        roots, looks = _holding_up(job, roots, looks, astir, moved_on)
        if not roots:
            return []
        idle = [rank for rank, look in looks.items() if not (look.working or look.pending)]
        if idle and len(idle) < len(looks) == len(roots):
            # those seen at work beside a rank seen doing nothing make progress: waits, not this page's culprits
            roots, looks = idle, {rank: looks[rank] for rank in idle}
        habit = observe(job, ctx, roots, waited, {rank: look.verdict for rank, look in looks.items()}, lambda: True)
        if habit is not None and waited <= habit.allowance(hang_after):
            return []
        if habit is not None:
            ctx.routine.outlasted(roots)
    lines = _lines(waiting, tuple(roots))
    working = all_working(list(looks.values()))
    h = Hang(
        severity=WARNING if early or working else CRITICAL,
        roots=tuple(roots),
        shown=tuple(_root(job, rank, looks[rank]) for rank in roots[:MAX_SHOWN]),
        lines=tuple(lines[:6]),
        places=len(lines),
        unshown=sum(len(line.ranks) for line in lines[6:]),
        waiting=len(waiting),
        oldest=waited,
        timeout_left=None,
        early=early,
        working=working and not early,
        hang_after=hang_after,
        habit=habit,
        unseen=unseen,
    )
    summary, detail = hang_words(h)
    return [Finding("hang", AlertKind.HANG, h.severity, roots, summary, detail, said(job, roots, ctx, looks))]


def _holding_up(
    job: JobState, roots: list[int], looks: dict[int, Look], astir: bool, moved_on: set[int]
) -> tuple[list[int], dict[int, Look]]:
    """The roots that may hold the others up, and their looks. Not one whose process has ended:
    ``found_gone``'s to name, once the others have run on without it. Nor one whose stack has
    only just come where it stands, seen idle there, or at work while a rank at its peers has
    only just come there too, or at work where it came from the wait (``moved_on``): it moved,
    and so did the collective, which an eye seconds behind on a loaded host still shows others
    waiting in. (One seen at work all along, while the others stand still, is a warning that
    says so; one that stood still where it is, the hang's.)"""
    out = {
        rank: look
        for rank, look in looks.items()
        if not _ended(look) and not (_new_there(job, rank) and (astir or not look.working or rank in moved_on))
    }
    return [r for r in roots if r in out], out


def _ended(look: Look) -> bool:
    return look.verdict is not None and look.verdict.kind in ENDED


def _new_there(job: JobState, rank: int) -> bool:
    """The rank's stack, taken, has not stood where it is for long (moving, or only just come)."""
    r = job.report_of(rank)
    return bool(r.stack) and r.outside is not None and r.outside.stood_since is None


def _early_look(s: RankState | None, verdict: Verdict | None, ctx: Context, waited: float) -> Look:
    """A root named early for ``verdict``; one holding the GIL with its stack taken from
    outside, native frames and all, which names the call that holds it."""
    if s is None or verdict is None or verdict.kind != Doing.GIL:
        return Look(verdict)
    look = look_at(s, ctx, silent=True, waited=waited)
    return look if look.verdict is not None and look.verdict.kind == Doing.GIL else Look(verdict, stack=look.stack)


def _root_look(s: RankState, ctx: Context, waited: float) -> Look:
    """A root's process over the ``waited`` seconds; one holding the GIL with its stack taken
    from outside, native frames and all (its report's has its Python frames only)."""
    look = look_at(s, ctx, silent=False, waited=waited)
    if look.verdict is not None and look.verdict.kind == Doing.GIL:
        return look_at(s, ctx, silent=True, waited=waited)
    return look


def _root(job: JobState, rank: int, look: Look) -> Root:
    s = job.ranks.get(rank)
    if s is None:
        return Root(rank, look)
    return Root(rank, look, s.report, s.finished, None)


def _ring(waiting: list[_Stood]) -> list[int]:
    """Ranks whose sends and receives name each other in a cycle: a deadlock."""
    toward = {w.rank: w.place.peer for w in waiting if w.place.peer is not None and w.place.peer != ANY_SOURCE}
    for start in sorted(toward):
        path, rank = [start], toward[start]
        while rank in toward and rank not in path:
            path.append(rank)
            rank = toward[rank]
        if rank in path:
            return sorted(path[path.index(rank) :])
    return []


def _deadlock(job: JobState, ctx: Context, ring: list[int], waiting: list[_Stood]) -> Finding:
    mine = {w.rank: w for w in waiting}
    shown = []
    for rank in ring[: MAX_SHOWN * 2]:
        w = mine[rank]
        peer = w.place.peer
        line = WaitLine(w.age, np.array([rank], dtype=np.int64), w.place, (peer,) if peer is not None else ())
        shown.append(InRing((line,), w.place.at))
    summary, detail = deadlock_words(Deadlock(tuple(ring), tuple(shown), False, True, ()))
    return Finding("hang:cycle", AlertKind.HANG, CRITICAL, ring, summary, detail, said(job, ring, ctx))


def _divergence(job: JobState, ctx: Context, by_place: dict[tuple[str | None, str, int], list[_Stood]]) -> Finding:
    """Every rank waits, in different collectives: those in the fewer places diverged from the
    many, each named with where it stands and where the others do."""
    groups = list(by_place.values())
    usual, odd = groups[0], [w for group in groups[1:] for w in group]
    odd_ranks = sorted(w.rank for w in odd)
    usual_ranks = sorted(w.rank for w in usual)
    there, here = _words(odd[0].place), _words(usual[0].place)
    summary = f"{rank_word(odd_ranks)} in {there}, the others in {here}"
    lines = [
        f"Seen from outside, {rank_word(odd_ranks)} stand in {there}, while {rank_word(usual_ranks)} stand in "
        f"{here}: each waits for the others to join its collective, and none will.",
    ]
    for w in odd[:MAX_SHOWN]:
        r = job.report_of(w.rank)
        lines.append(f"  rank {w.rank} ({r.host}, pid {r.pid}), standing still for {duration(w.age)}:")
        lines.extend(stack_lines(r.stack, 3, "    "))
    r = job.report_of(usual[0].rank)
    lines.append(f"  the others, like rank {usual[0].rank}:")
    lines.extend(stack_lines(r.stack, 3, "    "))
    lines.append(
        "What to do: every rank must issue the same collectives in the same order. Move the "
        "collective out of any `if rank == ...` branch, and give every rank the same number "
        "of batches (DistributedSampler(drop_last=True), equal shards for an IterableDataset)."
    )
    return Finding(
        "divergence:found",
        AlertKind.DIVERGENCE,
        CRITICAL,
        odd_ranks,
        summary,
        "\n".join(lines),
        said(job, odd_ranks, ctx),
    )


def _unseen(job: JobState, unseen: list[int], waiting: list[_Stood]) -> Finding:
    """Every rank seen waits on its peers, and the job has ranks not seen (on nodes not looked
    at, or not reached): whom they wait for is among those, and nobody is named."""
    reached = tuple(line for r in job.told.reached.values() if (line := reach_line(r)))
    u = Unseen(tuple(_lines(waiting, tuple(unseen))), tuple(unseen), tuple(job.hosts), job.world, reached)
    summary, detail = unseen_words(u)
    return Finding("hang:unseen", AlertKind.HANG, CRITICAL, [], summary, detail, {})


def _stuck(waiting: list[_Stood]) -> Finding:
    """Every rank waits in one collective, called at one place, and it does not complete."""
    age = max(w.age for w in waiting)
    stuck = StuckCollective(waiting[0].place, age, None, None, ())
    summary, detail = stuck_collective_words(stuck)
    return Finding("hang:found", AlertKind.HANG, CRITICAL, [], summary, detail, {})


def _words(place: WaitedIn) -> str:
    op = place.op or "a collective"
    return f"{op} at {where(place.at)}"


def found_gone(job: JobState, ctx: Context) -> list[Finding]:
    """``rank_lost`` for ranks found from outside: a rank whose process ended while the others
    ran on for :data:`RAN_ON` seconds, some of them standing still waiting on their peers.
    Seen from outside, a process leaves no last words, and the order in which a job's
    processes end tells nothing (a rank killed takes longer to end than the peers its death
    brings down): a job whose processes all ended within that time ended, how distmon cannot
    tell, and no rank is named; nor is one while the others run on about their own work (rank
    0 saving the model after the others finished is a job ending well)."""
    found = job.found()
    gone = [s for s in job.views(found & job.flagged(wire.FLAG_EXITED)) if _gone_at(s) is not None]
    if not gone:
        return []
    running = found & job.live(ctx.now)
    ages = [s.age(_gone_at(s) or 0.0, ctx.now) for s in gone]
    if max(ages) < RAN_ON or not (running & job.waiting_on_peers(ctx.now)).any():
        return []
    ranks = sorted(s.rank for s in gone)
    others = np.flatnonzero(running).tolist()
    summary = (
        f"{rank_word(ranks)} {'its process' if len(ranks) == 1 else 'their processes'} ended "
        f"{duration(max(ages))} ago while {rank_word(others)} run on: no last words (found without the hook)"
    )
    lines = [
        f"{rank_word(ranks)}: seen from outside, the process ended; how (a signal, an exception), only its log says."
    ]
    for s in sorted(gone, key=lambda s: s.rank)[:MAX_SHOWN]:
        r = s.report
        lines.append(f"  rank {r.rank} on {r.host} (pid {r.pid}), last seen at:")
        lines.extend(stack_lines(r.stack, 3, "    "))
    lines.append(
        "What to do: read that rank's lines in the job's log (torchrun prefixes them with [rankN]) and the node's "
        "kernel log (`dmesg -T | grep -i -e oom -e killed -e segfault`)."
    )
    return [
        Finding("rank_lost", AlertKind.RANK_LOST, CRITICAL, ranks, summary, "\n".join(lines), said(job, ranks, ctx))
    ]


def _gone_at(s: RankState) -> float | None:
    exit = s.report.exit
    return exit.t if exit is not None and exit.how == wire.GONE else None
