"""The hang's incidents in words: the facts :mod:`distmon.monitor.rules.hang` decides of each
(who holds the job up, who waits in what, what the roots were seen doing, the severity), and
the summary and detail they read as. Nothing is decided here: a sentence only says its facts,
so the words can change without changing what an alert finds, and the other way round."""

from __future__ import annotations

from dataclasses import dataclass

from distmon.monitor.rules.process import Look, look_lines, look_step, why_a_warning
from distmon.monitor.rules.routine import Habit, about
from distmon.monitor.rules.waitfor import Transfer, message_words
from distmon.monitor.state.columns import I8
from distmon.monitor.state.words import duration, group_label, rank_lines, rank_word, ranks_text, where
from distmon.wire import ANY_SOURCE, SEND, STOPPED_HOWS, Report, StackFrame


@dataclass(frozen=True)
class WaitedIn:
    """What ranks wait in: collective ``seq`` (its ``op``, where known) of ``group``, or, for
    a send or receive, ``message`` as seen from ``rank``'s side. Seen from outside (a job
    found without the hook: no sequence numbers), the ``op`` their stacks stand in, called
    ``at`` the user's frame, and the ``peer`` a send or receive names."""

    group: str
    """The group's name, or its short label for a message."""
    seq: int = 0
    op: str | None = None
    message: Transfer | None = None
    rank: int = 0
    at: StackFrame | None = None
    peer: int | None = None


@dataclass(frozen=True)
class WaitLine:
    """``ranks`` waiting in ``place`` for ``awaited``, for up to ``age`` seconds: a line of the evidence."""

    age: float
    ranks: I8
    place: WaitedIn
    awaited: tuple[int, ...]


@dataclass(frozen=True)
class Root:
    """A rank that holds the others up, as its reports show it and as it was seen from outside."""

    rank: int
    look: Look
    report: Report | None = None
    """Its latest report; None where it never reported."""
    finished: bool = False
    silent_for: float | None = None
    """Seconds since it was last heard from, where it is silent."""


@dataclass(frozen=True)
class Hang:
    """Ranks wait for ``roots``, who wait for nobody."""

    severity: str
    roots: tuple[int, ...]
    shown: tuple[Root, ...]
    """The first roots, whose whereabouts the evidence shows."""
    lines: tuple[WaitLine, ...]
    """The first collectives and messages waited in, those waiting for the roots themselves first."""
    places: int
    """How many collectives and messages are waited in, shown or not."""
    unshown: int
    """The ranks waiting in those not shown."""
    waiting: int
    oldest: float
    timeout_left: float | None
    """Seconds until the earliest collective timeout fires, where the groups have one."""
    early: bool
    """Named before the hang threshold, for doing nothing seen from outside."""
    working: bool
    """Every root makes progress or is being looked at, and no collective timeout is near."""
    hang_after: float
    habit: Habit | None = None
    """The usual pause this one outlasts."""
    unseen: tuple[int, ...] = ()
    """Ranks of the job not seen (found from outside, on nodes not looked at)."""


@dataclass(frozen=True)
class StuckCollective:
    """Every member of ``place`` issued it, and it does not complete."""

    place: WaitedIn
    age: float
    timeout: float | None
    fires: float | None
    """Seconds until that timeout fires."""
    suspects: tuple[int, ...]
    """Its members that also hold up other groups."""


@dataclass(frozen=True)
class Unseen:
    """Every rank seen waits on its peers (``lines``), and the job's ranks ``unseen`` were not
    seen: whom they wait for is among those. ``hosts``: the hosts seen; ``reached``: what the
    nodes reached and not seen said, in words."""

    lines: tuple[WaitLine, ...]
    unseen: tuple[int, ...]
    hosts: tuple[str, ...]
    world: int
    reached: tuple[str, ...]


@dataclass(frozen=True)
class StuckMessage:
    """Both ends of ``message`` posted it, and it does not arrive."""

    message: Transfer
    group: str
    age: float
    waiting: I8


@dataclass(frozen=True)
class InRing:
    """A rank of a deadlock: what it waits in for others of the ring, and where its code is."""

    waits: tuple[WaitLine, ...]
    frame: StackFrame | None


@dataclass(frozen=True)
class Deadlock:
    """The ``ring`` of ranks wait for each other, in ``groups``."""

    ring: tuple[int, ...]
    shown: tuple[InRing, ...]
    collective: bool
    """Some of the ring wait in a collective ..."""
    p2p: bool
    """... some in a send or receive."""
    groups: tuple[str, ...]
    """The groups they wait in; none where seen from outside (a stack names no group)."""


def what(place: WaitedIn) -> str:
    """``collective #7 (all_reduce) of group 4 (...)``, or ``recv #12 from rank 2 in group 3``;
    seen from outside, ``all_reduce at train.py:42 in step``."""
    if place.message is not None:
        return message_words(place.message, place.rank, place.group)
    if place.at is not None:
        return _collective(place)
    return f"{_collective(place)} of {place.group}"


def _collective(place: WaitedIn) -> str:
    if place.at is not None:
        op = place.op or "a collective"
        if place.peer is not None:
            toward = "to" if place.op in ("send", "isend") else "from"
            op += f" {toward} {'any rank' if place.peer == ANY_SOURCE else f'rank {place.peer}'}"
        return f"{op} at {where(place.at)}"
    return f"collective #{place.seq}{f' ({place.op})' if place.op else ''}"


UNTIMED = 0.05
"""A wait shorter is one no time is known for (a log whose line gives none, judged as of that
line): live, a wait is seconds old before it is one."""


def _lasting(words: str, age: float) -> str:
    """``words`` and the wait's length; nothing where no time is known."""
    return f"{words}{duration(age)}" if age >= UNTIMED else ""


def hang_words(h: Hang) -> tuple[str, str]:
    """The hang's summary and detail."""
    who = rank_word(h.roots)
    one = len(h.roots) == 1
    them = "it" if one else "them"
    doing = h.shown[0].look.verdict if one else None
    who_does = f"{who} {doing.summary}; " if doing is not None else f"{who} {'holds' if one else 'hold'} up the job: "
    usually = f"; this pause usually ends within {about(h.habit.longest)}" if h.habit is not None else ""
    more = f" and {h.places - 1} more" if h.places > 1 else ""
    summary = (
        f"{who_does}{h.waiting} {'rank waits' if h.waiting == 1 else 'ranks wait'} "
        f"for {them}, in {what(h.lines[0].place)}{more}{_lasting(', for up to ', h.oldest)}{usually}"
    )
    countdown = (
        f"; the earliest collective timeout fires in {duration(h.timeout_left)}" if h.timeout_left is not None else ""
    )
    detail = [
        f"{who} {'waits' if one else 'wait'} for nobody, and every waiting rank waits for "
        f"{them}, directly or through a peer{_lasting(': the oldest wait is ', h.oldest)}{countdown}.",
    ]
    if h.habit is not None:
        detail.append(
            f"The job pauses so as a habit ({h.habit.words()}, {h.habit.taken} times so far) and always came "
            f"out within {about(h.habit.longest)}; this time it has not, after {duration(h.oldest)}."
        )
    for root in h.shown:
        detail.extend(_root_lines(root))
        detail.extend(look_lines(root.look))
    if len(h.roots) > len(h.shown):
        detail.append(f"  ... and {len(h.roots) - len(h.shown)} more: {ranks_text(h.roots)}")
    detail.append("Waiting:")
    for line in h.lines:
        for_whom = f" for {rank_word(line.awaited)}" if line.awaited else ""
        detail.append(f"  {rank_word(line.ranks)} in {what(line.place)}{for_whom}{_lasting(', ', line.age)}")
    if h.places > len(h.lines):
        detail.append(f"  ... and {h.unshown} more ranks in {h.places - len(h.lines)} more collectives or sends")
    if h.unseen:
        unseen = rank_word(h.unseen)
        detail.append(f"Not seen: {unseen}, on nodes not looked at: they may hold the job up too.")
    detail.extend(_advice(h, who))
    return summary, "\n".join(detail)


def unseen_words(u: Unseen) -> tuple[str, str]:
    """Ranks seen all wait, for ranks not seen: what is known, what is not, and where to look."""
    waiting = sum(len(line.ranks) for line in u.lines)
    oldest = max(line.age for line in u.lines)
    seen = rank_word(sorted(int(r) for line in u.lines for r in line.ranks))
    unseen = rank_word(u.unseen)
    where = ", ".join(u.hosts) or "this host"
    summary = (
        f"{seen} {'waits' if waiting == 1 else 'wait'}, in {what(u.lines[0].place)}"
        f"{_lasting(', for up to ', oldest)}: whom for is not seen ({unseen}, on other nodes)"
    )
    detail = [
        f"Every rank seen ({seen}, on {where}) waits on its peers, and none of them holds the others up. "
        f"The job has {u.world} ranks: {unseen} {'was' if len(u.unseen) == 1 else 'were'} not seen, and the "
        "one the others wait for is among them.",
        "Waiting:",
        *(f"  {rank_word(line.ranks)} in {what(line.place)}{_lasting(', ', line.age)}" for line in u.lines),
    ]
    if u.reached:
        detail += ["Nodes not seen:", *(f"  {line}" for line in u.reached)]
    detail.append(
        f"What to do: look at {unseen} where {'it runs' if len(u.unseen) == 1 else 'they run'}: from a host that "
        "reaches every node of the job, `distmon look --hosts NODE,...` (over ssh) or `distmon look --slurm JOBID`; "
        "or `distmon look` on their node."
    )
    return summary, "\n".join(detail)


def _advice(h: Hang, who: str) -> list[str]:
    """What the hang's alert ends with: why it is a warning, or what to do."""
    many = len(h.roots) > 1
    lines = []
    if h.early:
        lines.append(
            f"A warning for now: {who} {'do' if many else 'does'} nothing, seen from outside, "
            f"while the others wait; it turns critical once the wait reaches {duration(h.hang_after)}."
        )
    steps = [step for root in h.shown if (step := look_step(root.rank, root.look))]
    if h.working:
        looks = [root.look for root in h.shown]
        lines.append(why_a_warning(who, many, looks, "a hang", "the progress stops or the collective timeout nears"))
    elif steps:
        lines.extend(steps)
    if not steps and not h.working:
        lines.append(
            f"What to do: find why {who} stopped short of its next collective or send; the stack "
            "shows where it is. The usual causes: a code path only some ranks take (if rank == 0: "
            "checkpoint, evaluation, logging), I/O or a lock on one rank, a rank with fewer "
            "batches, or a pipeline stage stuck in its own compute. `py-spy dump --pid PID` on its "
            "host shows every thread."
        )
    return lines


def _root_lines(root: Root) -> list[str]:
    """Where a root is, by its reports (its last stack: not for a silent rank whose stack was
    taken from outside)."""
    r = root.report
    if r is None:
        return [f"  rank {root.rank}: never reported (not monitored, or not started)"]
    head = f"  rank {root.rank} ({r.host}, pid {r.pid}): {_progress(r)}; "
    if root.finished:
        how = r.exit.how if r.exit else ""
        if r.exception:
            return [head + f"raised {r.exception.type}: it left while the others still expect it"]
        if how in STOPPED_HOWS:
            return [head + f"was {how} while the others still expect it"]
        return [head + "exited cleanly while the others still expect it (uneven batch counts?)"]
    if root.silent_for is not None:
        stack = [] if root.look.stack else rank_lines(r, 3, "    ")
        return [head + f"silent for {duration(root.silent_for)}", *stack]
    stood = "its stack stood still" if r.outside is not None else "stalled"
    stalled = f"{stood} for {duration(r.t - r.stalled_since)}, " if r.stalled_since else ""
    return [head + stalled + "at:", *rank_lines(r, 4, "    ")]


def _progress(r: Report) -> str:
    """How far a rank got, by its reports: its step, its last collectives and messages; for a
    rank found from outside, that it cannot say."""
    if r.outside is not None:
        return "found without the hook (no steps or sequence numbers: its stack and process are the evidence)"
    last = ", ".join(f"#{g.enqueued} in {group_label(g.id, g.desc)}" for g in r.groups if g.enqueued)
    sent = [
        f"{'sent' if c.dir == SEND else 'received'} #{c.posted} {'to' if c.dir == SEND else 'from'} rank {c.peer}"
        for c in r.p2p
        if c.posted and c.peer != ANY_SOURCE
    ]
    story = [f"last collectives {last or 'none'}" if last or not sent else "", *sent]
    return f"step {r.steps}, {', '.join(p for p in story if p) or 'none'}"


def stuck_collective_words(c: StuckCollective) -> tuple[str, str]:
    """A collective's summary and detail; where some of its members are also what other waits
    wait for (they never issued work their peers elsewhere did), those members are named."""
    group, collective = c.place.group, _collective(c.place)
    left = (
        f"; the {duration(c.timeout)} collective timeout fires in {duration(c.fires)}"
        if c.timeout and c.fires is not None
        else ""
    )
    summary = f"all ranks of {group} stuck in {collective} for {duration(c.age)}, none behind"
    detail = [
        f"Every rank of {group} issued {collective} and has waited {duration(c.age)}{left}.",
        "No rank is behind: the collective itself does not complete.",
    ]
    if c.suspects:
        suspects, one = rank_word(c.suspects), len(c.suspects) == 1
        summary += f"; {suspects} also {'holds' if one else 'hold'} up other groups"
        detail.append(
            f"{suspects} never issued work that {'its' if one else 'their'} peers in "
            "other groups issued and wait in, while the other members of this group did: the device or host "
            f"of {suspects} is the likeliest cause."
        )
    detail.append(
        "What to do: suspect the transport or a device: NCCL's network (NCCL_DEBUG=INFO, "
        "NCCL_SOCKET_IFNAME), a GPU fault (dmesg, nvidia-smi -q), or an overloaded host."
    )
    return summary, "\n".join(detail)


def stuck_message_words(m: StuckMessage) -> tuple[str, str]:
    _, src, dst, k = m.message
    summary = (
        f"rank {src}'s send #{k} to rank {dst} in {m.group} is posted on both ends and does not "
        f"complete after {duration(m.age)}"
    )
    detail = [
        f"Rank {src} posted send #{k} to rank {dst}, and rank {dst} its receive #{k} from rank {src}; "
        f"{rank_word(m.waiting)} has waited in it {duration(m.age)}. Neither end is "
        "behind: the message does not arrive.",
        "What to do: suspect the link between the two ranks' hosts (NCCL_DEBUG=INFO, a firewall between "
        "nodes, NCCL_SOCKET_IFNAME), or sends and receives that disagree on tag, size or dtype.",
    ]
    return summary, "\n".join(detail)


def deadlock_words(d: Deadlock) -> tuple[str, str]:
    lines = []
    for rank in d.shown:
        for w in rank.waits:
            lines.append(
                f"  {rank_word(w.ranks)} waits in {what(w.place)} for {rank_word(w.awaited)}{_lasting(', ', w.age)}"
            )
        if rank.frame is not None:
            lines.append(f"    at {where(rank.frame)}")
    if d.p2p and not d.collective:
        how = "their sends and receives are ordered so that each waits for the other"
        advice = (
            "What to do: a rank that receives before it sends waits for a peer doing the same. Post "
            "the pair together (batch_isend_irecv), or order them by stage (even stages send first, "
            "odd ones receive first); look for a branch on rank or stage that orders them differently."
        )
    else:
        how = (
            "their sends, receives and collectives are ordered differently"
            if d.p2p
            else "they issue those groups' collectives in different orders"
        )
        advice = (
            "What to do: every rank must issue the collectives of overlapping groups in the same "
            "order, and post its sends and receives so that none waits for a reply first. Look for "
            "a code path that orders them by rank (pipeline stages, a branch on rank, an unordered "
            "dict of groups)."
        )
    ring = rank_word(d.ring)
    groups = f" in {'group' if len(d.groups) == 1 else 'groups'} {', '.join(d.groups)}" if d.groups else ""
    summary = f"deadlock: {ring} wait for each other{groups}: {how}"
    detail = [f"{ring} each wait for another of them, which waits in turn: a cycle nobody can leave.", *lines, advice]
    return summary, "\n".join(detail)
