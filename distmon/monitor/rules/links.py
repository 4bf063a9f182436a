"""``link_flapping``: a node's network link that drops and comes back.

A link that goes down and up again (a loose cable, a failing transceiver or switch port, an
InfiniBand port that retrains) stops every collective across it for as long as each drop
lasts, and the whole job with them; then everything goes on, so no rank is lost, nor the node,
and nothing else is said. The tools operators trust count these drops (an interface's carrier
losses, a port's ``link_downed``): a few in ten minutes is a node to drain before its link fails
for good. The node's eye reads the link's state and counters (:mod:`distmon.node.links`); what
changed, and when, is its record's (:class:`~distmon.monitor.state.nodes.NodeLinks`).

One drop is chance, no alarm; :data:`FLAPS` within :data:`WINDOW` are a warning naming the node
and its link, how often and how long, and whether the job stood still each time. A link down
for good is its node's loss (``node_lost``), not a flap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import WARNING, Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.nodes import NodeLinks
from distmon.monitor.state.words import duration, time_of_day
from distmon.node.eye import LINKS_EVERY
from distmon.node.links import IB, LinkChange

FLAPS = 2
"""Drops a link came back from within :data:`WINDOW` that make it a flapping link."""
WINDOW = 600.0
"""Seconds over which drops are counted: InfiniBand operators drain a node whose port went down
three times in ten minutes."""
SAME = 0.25
"""Drops whose lengths differ by at most this share of the longest (or one reading of the
eye) are said to last alike."""
PEERS_LOOKED_AT = 16
"""Ranks of other nodes whose steps tell whether the job stood still while a link was down."""
UNDER_WAY = 1
"""Steps another rank may complete over a drop for the job to have stood still: one under way
when the link went."""
MAX_SHOWN = 8


@dataclass(frozen=True)
class Drop:
    """A link down and up again: when it went (the monitor's clock), for how long (None: between
    two readings of its eye, so shorter than one), and the change that told it."""

    t: float
    lasted: float | None
    told: LinkChange


def link_flapping(job: JobState, ctx: Context) -> list[Finding]:
    """A warning for each node of the job with a link of the job's that came back from
    :data:`FLAPS` drops or more within :data:`WINDOW`, while it stands so. A link is the job's
    where the job stood still while it was down (once is enough), or an InfiniBand port: a
    node's other links (a management network, a container bridge) may come and go as they
    will, and a node that runs no rank of the job is none of its business."""
    since = ctx.now - WINDOW
    for key in [key for key in ctx.drops if key[2] < since]:
        del ctx.drops[key]
    told = {host: links for host, links in job.links.items() if links.said}
    if not told:
        return []
    hosts = set(job.hosts)
    findings = []
    for host, links in told.items():
        if host not in hosts:
            continue
        kinds = {link.name: link.kind for link in links.links}
        flapping = {}
        for link, found in drops(links, since).items():
            still = [_judged(job, ctx, host, link, d) for d in found]
            if len(found) >= FLAPS and (kinds.get(link) == IB or any(still)):
                flapping[link] = list(zip(found, still, strict=True))
        if flapping:
            findings.append(_flapping(host, flapping, kinds))
    return findings


def dropped_over(job: JobState, hosts: set[str], start: float, now: float, after: float) -> bool:
    """Whether a link of one of ``hosts`` was down from ``start`` on (the monitor's clock) and
    came back less than ``after`` ago: what crosses it waited for it, not for a rank, and the
    job goes on (or its link is ``link_flapping``'s; down for good, ``node_lost``'s)."""
    for host in hosts:
        links = job.links.get(host)
        if links is None or not links.said:
            continue
        for found in drops(links, start - WINDOW).values():
            if any(d.lasted is not None and d.t + d.lasted >= start and now - d.t - d.lasted < after for d in found):
                return True
    return False


def _judged(job: JobState, ctx: Context, host: str, link: str, drop: Drop) -> bool | None:
    """Whether the job stood still over ``drop``, judged once it can be told (the reports it
    lasted over are in) and kept: histories move on."""
    key = (host, link, drop.t)
    if ctx.drops.get(key) is None:
        ctx.drops[key] = _stood_still(job, host, drop)
    return ctx.drops[key]


def drops(links: NodeLinks, since: float) -> dict[str, list[Drop]]:
    """Per link of a node, the drops it came back from that began at ``since`` or after,
    oldest first: one it was read down and then up, or one its counter tells between two
    readings."""
    found: dict[str, list[Drop]] = {}
    went: dict[str, float] = {}
    for change in links.said:
        if change.went == "down":
            went[change.link] = change.t
        elif change.went == "up" and change.link in went:
            t = went.pop(change.link)
            found.setdefault(change.link, []).append(Drop(t, change.t - t, change))
        if change.drops:
            found.setdefault(change.link, []).extend(Drop(change.t, None, change) for _ in range(change.drops))
    return {link: kept for link, all_of in found.items() if (kept := [d for d in all_of if d.t >= since])}


def _flapping(host: str, flapping: dict[str, list[tuple[Drop, bool | None]]], kinds: dict[str, str]) -> Finding:
    link, told = max(flapping.items(), key=lambda item: len(item[1]))
    found, still = [d for d, _ in told], [s for _, s in told]
    others = [f"{name} {len(d)} times" for name, d in flapping.items() if name != link]
    also = f" (and {', '.join(others)})" if others else ""
    span = max(d.t + (d.lasted or 0.0) for d in found) - found[0].t
    summary = f"{host}: {link} down {len(found)} times in {duration(span)}, {_each(found)}{_job(still)}{also}"
    lines = [f"{link} on {host} went down and came back {len(found)} times, as the node's eye read it:"]
    lines.extend(f"  {_drop_words(d)}{_stood_words(stood)}" for d, stood in told[-MAX_SHOWN:])
    lines.extend(f"{name.split()[0]} on {host} went down and came back too: {name}." for name in others)
    lines.append(
        f"Each time, what crosses {link} waits (every collective with the ranks on {host}), and the job with it; "
        "then it goes on, so no rank or node is lost. A link that keeps dropping fails for good sooner or later."
    )
    tools = (
        "ibstat, perfquery: link_downed, symbol errors"
        if kinds.get(link) == IB
        else f"ip -s link show {link}, ethtool -S {link}"
    )
    lines.append(
        f"What to do: the link, not the training code. Check {link} on {host} ({tools}) and its switch port's log; "
        f"drain {host} before the next job (Slurm: scontrol update nodename={host} state=drain "
        f'reason="{link} flapping"; Kubernetes: kubectl drain {host}), and restart this one without it '
        "if the stalls cost too much."
    )
    return Finding(f"link_flapping:{host}", AlertKind.LINK_FLAPPING, WARNING, [], summary, "\n".join(lines))


def _each(found: list[Drop]) -> str:
    """``3.0s each``, ``1.0s to 3.0s each``; the drops between two readings said apart."""
    lasted = sorted(d.lasted for d in found if d.lasted is not None)
    short = len(found) - len(lasted)
    words = []
    if lasted:
        alike = lasted[-1] - lasted[0] <= max(LINKS_EVERY, SAME * lasted[-1])
        middle = lasted[len(lasted) // 2]
        words.append(f"{duration(middle)} each" if alike else f"{duration(lasted[0])} to {duration(lasted[-1])} each")
    if short:
        which = "each" if not lasted else f"{short} of them"
        words.append(f"{which} shorter than the eye's {LINKS_EVERY:g}s between readings")
    return ", ".join(words)


def _job(still: list[bool | None]) -> str:
    """``; the job stood still each time``, or how often it did, or that it went on."""
    known = [s for s in still if s is not None]
    if not known:
        return ""
    if all(known):
        return "; the job stood still each time" if len(known) == len(still) else "; the job stood still"
    if not any(known):
        return "; the job went on"
    return f"; the job stood still {sum(known)} of {len(known)} times"


def _drop_words(d: Drop) -> str:
    if d.lasted is None:
        return f"before {time_of_day(d.t)}: down and up again between two readings ({d.told.words})"
    return f"{time_of_day(d.t)}: down {duration(d.lasted)}"


def _stood_words(stood: bool | None) -> str:
    return {True: "; the job stood still", False: "; the job went on", None: ""}[stood]


def _stood_still(job: JobState, host: str, drop: Drop) -> bool | None:
    """Whether the job stood still while ``drop`` lasted: ranks of other nodes, around it,
    sent reports over half its length or more without completing more than
    :data:`UNDER_WAY` step. None where it cannot be told: a drop between two readings, or
    shorter than their reports' interval, no rank elsewhere, histories that do not reach back so
    far. The reports are set on the monitor's clock by the least delay seen on their way, which
    a relay's batching may stretch by up to an interval: they are looked for an interval wider
    on each side."""
    if drop.lasted is None:
        return None
    c = job.cols
    counting = c.present & ~job.found()  # a rank found from outside counts no steps
    others = np.flatnonzero(counting & (c.host != wire.name_hash(host)))[:PEERS_LOOKED_AT]
    spans = [_still_over(job, rank, drop.t, drop.t + drop.lasted) for rank in others.tolist()]
    known = [span for span in spans if span is not None]
    return min(known) >= drop.lasted / 2 if known else None


def _still_over(job: JobState, rank: int, start: float, end: float) -> float | None:
    """The longest span of ``rank``'s reports around ``start``..``end`` (the monitor's clock)
    over which it completed no more than :data:`UNDER_WAY` step; None where its reports do not
    cover that time, come too seldom to tell, or its steps are too long to show progress over
    it."""
    c = job.cols
    interval = float(np.nan_to_num(c.interval[rank], nan=1.0))
    if end - start < max(interval, 2 * float(np.nan_to_num(c.step_p50[rank], nan=0.0))):
        return None
    history = RankState(job, rank).history
    offset = float(c.least_delay[rank])
    reports = [
        (t + offset, steps)
        for t, steps in zip(history.series("t"), history.series("steps"), strict=True)
        if start - 2 * interval <= t + offset <= end + 2 * interval
    ]
    if len(reports) < 2 or reports[0][0] > start:
        return None
    longest, first = 0.0, 0
    for last in range(1, len(reports)):
        while reports[last][1] - reports[first][1] > UNDER_WAY:
            first += 1
        longest = max(longest, reports[last][0] - reports[first][0])
    return longest
