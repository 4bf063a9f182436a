"""``node_lost`` and ``node_unwatched``: a node silent as a whole, lost or only unwatched.

When a node's relay and every rank behind it fall silent together (or, without a relay, every
rank of one host: :mod:`distmon.monitor.state.nodes`), either the node failed (its network
cut, the machine down) or only its relay did. What the other ranks do tells which:

- they wait for its ranks (in a collective of a group its ranks are in, or a send or receive
  to one of them) longer than three steps, or they raised on losing a peer: the node is lost,
  one critical ``node_lost`` naming it and its ranks; the hang and ``rank_lost`` leave its
  ranks to it, so that one incident stays one alert;
- they step on, completing collectives its ranks are in past where those were last heard:
  its ranks train on, unwatched: a ``node_unwatched`` warning naming no rank, resolved when
  the node is heard again;
- neither yet: nothing, until a hang's time past its silence; then a node silent as a whole
  is lost, whatever the others do.

A node without a relay whose ranks the monitor's own eye sees (it runs there) is no lost node:
a rank of it is ``rank_lost``'s or the hang's (a relay's node was watched by that relay, silent
now). Nor is one last heard after the job began to be torn down (a rank failed on its own, or
was stopped by a signal): it went with the job.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.process import said
from distmon.monitor.rules.waitfor import Group, Wait, collect_groups, message_words, wait_op, waits
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import I8
from distmon.monitor.state.consequences import LOST_PEER
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.nodes import SilentNode
from distmon.monitor.state.words import duration, group_name, rank_word, time_of_day

TEARDOWN_SLACK = 0.5
"""Jitter allowed when deciding whether a silent rank was still alive at the first failure."""
PEERS_LOOKED_AT = 16
"""Ranks sharing a group with a silent node whose steps tell whether its ranks train on."""
STEPS_ON = 2
"""Steps another rank must complete after a node fell silent to show that its ranks train on:
a step under way when the node went may end after (its collectives done before); a second
cannot."""
LINKS_BEFORE = 60.0
"""Seconds before a node fell silent from which the alert quotes its links going down."""
MAX_WAITS_SHOWN = 4
MAX_LINKS_SHOWN = 3
"""Link changes the alert quotes: the first after :data:`LINKS_BEFORE`, the rest counted."""


@dataclass(frozen=True)
class Steps:
    """Evidence that a silent node's ranks train on: ranks sharing a group with them stepped
    on, and a group's collectives completed past where its ranks were last heard; or (no
    ``group``) ranks stepped on and then finished the job cleanly, which they could not have
    done without them."""

    ranks: list[int]
    group: str = ""
    completed: int = 0
    theirs: int = 0


def process_state(job: JobState, rank: int, ctx: Context) -> str | None:
    """What its node's eye says of ``rank``'s process: alive, gone, or None (no eye watches its
    node, or it cannot tell). Its host and pid come from the columns: its report is not
    decoded (nor its whole report asked of the relays) to ask."""
    if ctx.probe is None:
        return None
    try:
        return ctx.probe(*job.process_of(rank))
    except Exception:
        return None


@dataclass(frozen=True)
class Judged:
    """A silent node as the others' evidence shows it: what they wait for it in (lost), or
    their steps since it went (its ranks train on); neither: it cannot be told yet."""

    node: SilentNode
    waiting: list[Wait]
    steps: Steps | None


def node_ranks(job: JobState, ctx: Context, training: bool = True) -> I8:
    """The ranks of the nodes silent as a whole, or about to be (a host without a relay
    overdue), that this rule judges: not ``rank_lost``'s to name, nor the hang's unless
    ``training`` (a node whose ranks train on unwatched may yet hold the job up: the hang names
    its ranks then)."""
    nodes = [j.node for j in judged(job, ctx, overdue=True) if training or j.steps is None]
    return np.concatenate([n.ranks for n in nodes]) if nodes else np.zeros(0, dtype=np.int64)


def judged(job: JobState, ctx: Context, overdue: bool = False) -> list[Judged]:
    """The silent (or ``overdue``) nodes this rule judges, with the others' evidence: those last
    heard before the teardown began, and either training on or out of every eye's sight (the
    ranks of a host without a relay that the monitor runs on are seen: their own rules tell)."""
    nodes = job.silent_nodes(ctx.now, overdue)
    if not nodes:
        return []
    c = job.cols
    stops = c.received[job.flagged(wire.FLAG_STOPPED_BY_SIGNAL)]
    began = min(float(stops.min(initial=np.inf)), job.first_failure() or np.inf)
    live = job.live(ctx.now)
    waiting = waits(job, ctx, live)
    groups = collect_groups(job, waiting, live)
    found = []
    for node in nodes:
        if node.since + float(np.nanmax(c.interval[node.ranks])) + TEARDOWN_SLACK >= began:
            continue  # it went with the job
        waits_for = _waits_for(job, ctx, node, waiting, groups)
        steps = None if waits_for else _trains_on(job, ctx, node)
        if steps is not None or not _seen(job, ctx, node):
            found.append(Judged(node, waits_for, steps))
    return found


def _seen(job: JobState, ctx: Context, node: SilentNode) -> bool:
    """Whether an eye still sees ``node``'s processes: the monitor's own, on its host. A node
    that reported through a relay was watched by that relay, silent now: what it last said of
    them is old news."""
    return node.relay is None and process_state(job, int(node.ranks[0]), ctx) is not None


def node_lost(job: JobState, ctx: Context) -> list[Finding]:
    """A lost node, or an unwatched one (see the module's words). Nothing while the monitor is
    behind: the silence may be its own."""
    if ctx.behind is not None:
        return []
    findings = []
    for j in judged(job, ctx):
        node = j.node
        if j.steps is not None:
            findings.append(_unwatched(job, ctx, node, j.steps))
            continue
        gave_up = np.setdiff1d(
            np.flatnonzero(job.consequences(LOST_PEER) & (job.cols.received >= node.since)), node.ranks
        ).tolist()
        silent = ctx.now - node.since
        if j.waiting or gave_up or silent >= ctx.limits.silent_after(ctx.interval) + ctx.hang_after:
            findings.append(_lost(job, ctx, node, j.waiting, gave_up))
    return findings


def _waits_for(
    job: JobState, ctx: Context, node: SilentNode, waiting: list[Wait], groups: dict[str, Group]
) -> list[Wait]:
    """Of the other live ranks' ``waiting``, the waits for ``node``'s ranks alone, begun about
    when it went silent and as long as a hang (a collective with ranks whose relay alone died
    completes within a few steps, but a loaded host's steps come and go: a shorter wait pages a
    node that trains on), the longest first: in a collective of ``groups`` every live member has
    issued, or a send or receive to one of its ranks. A wait begun long after (its ranks,
    unwatched, stopped since) is the hang's."""
    longest = ctx.hang_after
    began_by = node.since + float(np.nanmax(job.cols.interval[node.ranks])) + longest
    found = []
    for w in waiting:
        if w.age < longest or ctx.now - w.age > began_by or np.isin(w.ranks, node.ranks).all():
            continue  # too short, begun long after, or a wait of its own ranks (one heard a moment longer)
        if w.gid is not None:
            group = groups[w.gid]
            laggards = np.array(group.laggards(w.seq), dtype=np.int64)
            live_behind = (group.enqueued < w.seq) & ~group.quiet
            theirs = bool(np.isin(laggards, node.ranks).any()) and not live_behind.any()
        else:
            _, src, dst, _ = w.node  # type: ignore[misc]
            theirs = bool(np.isin([src, dst], node.ranks).any())
        if theirs:
            found.append(w)
    return sorted(found, key=lambda w: (-len(w.ranks), -w.age))


def _trains_on(job: JobState, ctx: Context, node: SilentNode) -> Steps | None:
    """Whether ``node``'s ranks train on unheard: ranks sharing a group with them have stepped
    :data:`STEPS_ON` times since the node could have been cut off, and completed collectives of
    such a group past those its ranks last said they issued (no collective completes without
    every member); or, once the others are done, such ranks stepped on and then finished the
    job cleanly (their last report holds no group: it was destroyed)."""
    c = job.cols
    used = int(c.groups.max(initial=0))
    rows = np.arange(used) < c.groups[:, None]
    theirs = distinct(c.g_id[node.ranks, :used][rows[node.ranks]])
    shares = job.live(ctx.now) & (np.isin(c.g_id[:, :used], theirs) & rows).any(axis=1)
    shares[node.ranks] = False  # its own, heard a moment longer, are no evidence
    peers = np.flatnonzero(shares)[:PEERS_LOOKED_AT]
    # Its reports may come as late as silence allows and the node still be up: it may have been cut
    # off that long after it was last heard (a loaded host's relay forwards late), its ranks
    # completing the others' collectives till then.
    cut_by = node.since + float(ctx.limits.silent_after(float(np.nanmax(c.interval[node.ranks]))))
    stepped = [p for p in peers.tolist() if _steps_since(job, p, cut_by) >= STEPS_ON]
    best: Steps | None = None
    for gid in theirs.tolist() if stepped else []:
        mine = (c.g_id[node.ranks, :used] == gid) & rows[node.ranks]
        others = (c.g_id[stepped, :used] == gid) & rows[stepped]
        issued = int(c.g_enq[node.ranks, :used][mine].max(initial=0))
        completed = int(c.g_comp[stepped, :used][others].max(initial=0))
        if completed > issued and (best is None or completed - issued > best.completed - best.theirs):
            sample = job.group(gid)
            name = group_name(sample.id, sample) if sample is not None else f"group #{gid:x}"
            best = Steps(stepped, name, completed, issued)
    if best is None:
        finished = job.flagged(wire.FLAG_EXITED) & ~job.flagged(wire.FLAG_STOPPED_BY_SIGNAL | wire.FLAG_RAISED)
        done = np.flatnonzero(finished & (c.received > cut_by))[:PEERS_LOOKED_AT].tolist()
        done = [p for p in done if _steps_since(job, p, cut_by) >= STEPS_ON]
        best = Steps(done) if done else None
    return best


def _steps_since(job: JobState, rank: int, t: float) -> int:
    """Steps ``rank`` completed since ``t`` (the monitor's clock), by its history of reports."""
    c = job.cols
    history = RankState(job, rank).history
    offset = float(c.received[rank] - c.t[rank])
    for sent, steps in zip(history.series("t"), history.series("steps"), strict=True):
        if sent + offset >= t:
            return int(c.steps[rank]) - int(steps)
    return 0


def _node_words(node: SilentNode) -> str:
    """``its relay and ranks 2-3`` (``ranks 2-3, all its ranks`` without a relay)."""
    ranks = rank_word(node.ranks.tolist())
    return f"its relay and {ranks}" if node.relay is not None else f"{ranks}, all its ranks,"


def _lost(job: JobState, ctx: Context, node: SilentNode, waiting: list[Wait], gave_up: list[int]) -> Finding:
    ranks = node.ranks.tolist()
    since = time_of_day(node.since)
    if waiting:
        w = waiting[0]
        also = f" (and {len(waiting) - 1} more waits)" if len(waiting) > 1 else ""
        why = f"; {rank_word(w.ranks.tolist())} wait for them in {_what(job, w)}{also}"
    elif gave_up:
        why = f"; {rank_word(gave_up)} lost the connection to them"
    else:
        why = ""
    summary = f"{node.host} lost: {_node_words(node)} unheard since {since}{why}"
    lines = [
        f"{node.host} fell silent as a whole at {since}, {duration(ctx.now - node.since)} ago: "
        + (
            f"distmon relay {node.relay.id} sent nothing, not even its empty batch each interval, and "
            f"{rank_word(ranks)}, which report through it, went with it."
            if node.relay is not None
            else f"{rank_word(ranks)}, every rank on it, stopped reporting together."
        )
    ]
    if waiting:
        lines.append("The other ranks wait for them:")
        lines.extend(
            f"  {rank_word(w.ranks.tolist())} in {_what(job, w)}, {duration(w.age)}" for w in waiting[:MAX_WAITS_SHOWN]
        )
    if gave_up:
        lines.append(f"{rank_word(gave_up)} raised on losing a peer: consequences, not causes.")
    if not waiting and not gave_up:
        lines.append(f"No other rank has stepped with them since: silent {duration(ctx.now - node.since)}, it is lost.")
    lines.extend(_links_lines(job, node))
    lines.append(
        f"What to do: the node or its network, not the training code. Ping {node.host} from the "
        "other nodes, check its links (ip link, ibstat) and the scheduler's view of it "
        "(sinfo -N, kubectl get node), and its kernel log (dmesg -T: link down, a panic, the OOM "
        "killer). Its ranks cannot finish their collectives without it: the job must be restarted "
        "without the node (or once it is back)."
    )
    return Finding(
        f"node_lost:{node.host}", "node_lost", CRITICAL, ranks, summary, "\n".join(lines), said(job, ranks, ctx)
    )


def _links_lines(job: JobState, node: SilentNode) -> list[str]:
    """What the node's relay said of its links: those that went down near when it went."""
    links = job.links.get(node.host)
    if links is None:
        return []
    downs = links.downs(node.since - LINKS_BEFORE)
    down = links.down()
    if downs:
        more = f"; and {len(downs) - MAX_LINKS_SHOWN} more" if len(downs) > MAX_LINKS_SHOWN else ""
        return [f"Its links, as its relay told: {'; '.join(c.said() for c in downs[:MAX_LINKS_SHOWN])}{more}."]
    if down:
        return [f"Its links down when its relay last read them: {', '.join(link.name for link in down)}."]
    return [f"Its links were up when its relay last read them, at {time_of_day(links.t)}."]


def _unwatched(job: JobState, ctx: Context, node: SilentNode, steps: Steps) -> Finding:
    ranks = rank_word(node.ranks.tolist())
    since = time_of_day(node.since)
    peers = rank_word(steps.ranks)
    relay = f"its relay is silent since {since}" if node.relay is not None else f"unheard since {since}"
    if steps.group:
        told = f"{peers} complete collectives with them"
        how = (
            f" Its {ranks} train on: {peers} stepped on since, and completed collective #{steps.completed} "
            f"of {steps.group}, past #{steps.theirs}, the last its ranks said they issued (no collective "
            "completes without every member)."
        )
    else:
        told = f"{peers} finished the job with them"
        how = (
            f" Its {ranks} trained on: {peers} stepped on since and finished the job cleanly, which they could "
            "not have done without them."
        )
    summary = f"{node.host} unwatched: {relay}; its {ranks} train on ({told})"
    lines = [
        f"{node.host} fell silent at {since}, {duration(ctx.now - node.since)} ago"
        + (f": distmon relay {node.relay.id} sends nothing." if node.relay is not None else ".")
        + how,
        f"While it is silent, a fault of {ranks} goes unseen.",
    ]
    if node.relay is not None:
        lines.append(
            f"What to do: restart `distmon relay` on {node.host} with the same --listen endpoint; its ranks "
            "reconnect by themselves, and this resolves once they are heard again."
        )
    else:
        lines.append(
            f"What to do: check the path from {node.host} to the monitor (a firewall, a route); its ranks "
            "send again by themselves once it is open."
        )
    return Finding(f"node_unwatched:{node.host}", AlertKind.NODE_UNWATCHED, WARNING, [], summary, "\n".join(lines))


def _what(job: JobState, w: Wait) -> str:
    """``all_reduce #961 of group 0 (default_pg, ranks 0-3)``, or a send or receive."""
    gid = w.gid if w.gid is not None else str(w.node[0])
    sample = job.group(wire.name_hash(gid))
    group = group_name(gid, sample) if sample is not None else f"group {gid}"
    if w.gid is None:
        return message_words(w.node, w.rank, group)  # type: ignore[arg-type]
    return f"{wait_op(w) or 'collective'} #{w.seq} of {group}"
