"""``stall``: the job stopped progressing and there is no sequence number to compare.

Before the first collective (a rank late to ``init_process_group``, a node that never
comes), or when every rank waits outside any collective (every DataLoader on a dead NFS
mount), the collective rules have nothing to go on. So the ranks are compared by where they
are: grouped by the place in the user's code their stacks show, the large group waiting in
the same place are the victims, the odd ones out and the ranks that never reported are the
culprits; a culprit that is working (CPU, bytes read or written: a slow import, a JIT
build) is a warning until it stops. Silent while any collective is in flight, or any rank is blocked in a send or
receive: that story is the wait-for relation's (:mod:`distmon.monitor.rules.hang`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from distmon.monitor.rules.base import Context
from distmon.monitor.rules.process import (
    Look,
    all_working,
    doing_nothing,
    look_at,
    look_lines,
    look_step,
    said,
    why_a_warning,
)
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.kinds import WAITING_PLACES, AlertKind, Doing
from distmon.monitor.state.whereabouts import Place, classify, frame_lines
from distmon.monitor.state.words import duration, rank_lines, rank_word

MAX_SHOWN = 4
"""Culprits whose whereabouts the evidence shows."""
MAX_HOSTS_SHOWN = 8
"""Hosts whose missing ranks the evidence lists; the rest are counted."""


def stall(job: JobState, ctx: Context) -> list[Finding]:
    present = job.present()
    c = job.cols
    if not len(present) or not job.stalled(ctx.now)[present].all():
        return []  # someone progresses, or died or left: not a stall of the job
    if (c.in_collective | c.in_p2p)[present].any():
        return []  # a collective in flight, or a blocked send or receive: the hang rule's story
    if job.found(present).any():
        return []  # found from outside, where their stacks stand: the found hang's story
    age = float(job.ages(c.stalled_since[present], ctx.now, present).min())
    early = age < ctx.limits.stall_alert_after(ctx.pace)
    if early and (ctx.pace is not None or age < ctx.limits.init_wait):
        return []
    # Ranks with the same stack stand in the same place: one stack classified per place.
    stacks, first = np.unique(c.stack[present], return_index=True)
    place_of = {int(h): classify(job.report_of(int(present[i])).stack) for h, i in zip(stacks, first, strict=True)}
    places = {rank: place_of[int(h)] for rank, h in zip(present.tolist(), c.stack[present].tolist(), strict=True)}
    ranks = job.views(present)
    by_place: dict[tuple[str, str, int], list[RankState]] = defaultdict(list)
    for s in ranks:
        by_place[places[s.rank].signature].append(s)
    missing = [] if ctx.behind is not None else sorted(set(range(job.world)) - set(job.ranks))
    victims_at = max(by_place, key=lambda k: (k[0] in WAITING_PLACES, len(by_place[k])))
    victims = by_place[victims_at]
    odd = sorted((s for s in ranks if places[s.rank].signature != victims_at), key=lambda s: s.rank)
    if early:
        return _late_to_init(job, ctx, victims, places[victims[0].rank], odd, missing, age)
    if not odd and not missing:
        return [_everyone(job, victims, places[victims[0].rank], age, ctx)]
    looks = {s.rank: look_at(s, ctx, silent=False) for s in odd[:MAX_SHOWN]}
    return [_odd_ones_out(job, ctx, victims, places[victims[0].rank], odd, missing, age, looks)]


def _late_to_init(
    job: JobState,
    ctx: Context,
    victims: list[RankState],
    place: Place,
    odd: list[RankState],
    missing: list[int],
    age: float,
) -> list[Finding]:
    """Start-up, before the stall threshold: the others wait in ``init_process_group`` for
    ranks that never reported or that, seen from outside, do nothing (asleep, stopped,
    blocked): named now, as a warning. A rank that works (a slow import) waits for the
    threshold, as before."""
    if place.kind != Doing.INIT or (not odd and not missing) or len(odd) > MAX_SHOWN:
        return []
    verdicts = {s.rank: doing_nothing(s, ctx, age) for s in odd}  # the first call starts the prober looking
    looks = {rank: Look(verdict) for rank, verdict in verdicts.items() if verdict is not None}
    if len(looks) < len(odd):
        return []
    return [_odd_ones_out(job, ctx, victims, place, odd, missing, age, looks, critical_at=ctx.limits.startup_hang)]


def _odd_ones_out(
    job: JobState,
    ctx: Context,
    victims: list[RankState],
    place: Place,
    odd: list[RankState],
    missing: list[int],
    age: float,
    looks: dict[int, Look],
    critical_at: float | None = None,
) -> Finding:
    """Ranks elsewhere than the many: culprits, unless every one of them is working (a slow
    import or JIT build at start-up, a checkpoint), which is a warning saying so; a warning too
    when named before the stall threshold, ``critical_at``."""
    culprits = [s.rank for s in odd] + missing
    waiting = sorted(s.rank for s in victims)
    working = not missing and len(looks) == len(odd) and all_working(list(looks.values()))
    doing = looks[culprits[0]].verdict if len(culprits) == 1 and culprits[0] in looks else None
    if doing is not None:
        summary = f"rank {culprits[0]} {doing.summary}; {rank_word(waiting)} wait {duration(age)} {place.words} for it"
    elif missing:
        hosts = by_host(job, missing)
        elsewhere = f" and {rank_word(s.rank for s in odd)}" if odd else ""
        never = "; ".join(hosts[:2]) + (f" and {len(hosts) - 2} more" if len(hosts) > 2 else "")
        summary = f"{never} never reported; {rank_word(waiting)} wait {duration(age)} {place.words} for them{elsewhere}"
    else:
        summary = f"{rank_word(waiting)} wait {duration(age)} {place.words} for {rank_word(culprits)}"
    lines = [
        f"No rank has progressed for {duration(age)} and no collective is in flight: there are no "
        "sequence numbers to compare, so the ranks are compared by where they are.",
        f"{rank_word(waiting)} ({len(waiting)} of {job.world}) wait {place.words}:",
        *frame_lines(victims[0].report.stack, depth=2),
    ]
    for s in odd[:MAX_SHOWN]:
        r = s.report
        lines.append(f"  rank {r.rank} ({r.host}, pid {r.pid}), at step {r.steps}, is elsewhere:")
        lines.extend(rank_lines(r, indent="    "))
        lines.extend(look_lines(looks[r.rank]))
    if len(odd) > MAX_SHOWN:
        lines.append(f"  ... and {rank_word(s.rank for s in odd[MAX_SHOWN:])} elsewhere too")
    if missing:
        lines.append(
            f"  {len(missing)} of {job.world} never reported (not started, stuck before importing torch, "
            "or not monitored):"
        )
        hosts = by_host(job, missing)
        lines.extend(f"    {words}" for words in hosts[:MAX_HOSTS_SHOWN])
        if len(hosts) > MAX_HOSTS_SHOWN:
            lines.append(f"    ... and {len(hosts) - MAX_HOSTS_SHOWN} more")
    steps = [step for rank, look in looks.items() if (step := look_step(rank, look))]
    if working:
        advice = why_a_warning(
            rank_word(culprits), len(culprits) > 1, list(looks.values()), "a stop", "the progress stops"
        )
    elif steps:
        advice = "\n".join(steps)
    elif place.kind == Doing.INIT:
        advice = (
            f"What to do: every rank must reach init_process_group; {rank_word(culprits)} did not. "
            "Look at where it is above (loading data or a checkpoint before init, a slow node); a rank "
            "that never reported did not start: check its node and the launcher's log. The others "
            "give up when the init timeout runs out."
        )
    else:
        advice = (
            f"What to do: find why {rank_word(culprits)} do not get to where the others wait; the "
            "stacks above show where they are. `py-spy dump --pid PID` on its host shows every thread."
        )
    if critical_at is not None:
        lines.append(
            f"A warning for now, named before the start-up's {duration(critical_at)}: it turns critical then "
            "unless they come."
        )
    lines.append(advice)
    severity = WARNING if working or critical_at is not None else CRITICAL
    return Finding(
        "stall", AlertKind.STALL, severity, culprits, summary, "\n".join(lines), said(job, culprits, ctx, looks)
    )


def _everyone(job: JobState, ranks: list[RankState], place: Place, age: float, ctx: Context) -> Finding:
    """Every rank stopped in the same place: no odd one out, the place itself is the news."""
    names = sorted(s.rank for s in ranks)
    summary = f"all {len(names)} ranks {place.words} for {duration(age)}, none progresses"
    lines = [
        f"No rank has progressed for {duration(age)} and no collective is in flight; every rank "
        f"stands in the same place, {place.words}:",
    ]
    for s in sorted(ranks, key=lambda s: s.rank)[:MAX_SHOWN]:
        r = s.report
        lines.append(f"  rank {r.rank} ({r.host}, pid {r.pid}), at step {r.steps}:")
        lines.extend(rank_lines(r, indent="    "))
    if len(ranks) > MAX_SHOWN:
        lines.append(f"  ... and {len(ranks) - MAX_SHOWN} more ranks in the same place")
    if place.kind == Doing.DATALOADER:
        lines.append(
            "What to do: the DataLoader workers do not deliver. Their stacks above show where they "
            "are: storage that stopped answering (a dead NFS or FUSE mount), a lock or a network "
            "call in __getitem__. Check the mount (`ls` it, `dmesg`), and give such reads a timeout."
        )
    else:
        lines.append(
            "What to do: the place above is where the job stopped; if it waits on something outside "
            "the job (storage, the network, a service), check that first."
        )
    # Every rank waiting on something that does not come is a stop; every rank busy in the
    # same place (a long checkpoint, a slow start) may only be slow.
    severity = CRITICAL if place.kind in WAITING_PLACES else WARNING
    return Finding("stall", AlertKind.STALL, severity, names, summary, "\n".join(lines), said(job, names, ctx))


def by_host(job: JobState, missing: list[int]) -> list[str]:
    """Ranks that never reported, by the host they would run on, the most first: ``ranks
    1024-1279 on node017-node048``. A launcher numbers ranks node by node (``node_rank * nproc +
    local_rank``), so a missing rank's node is known from the ranks heard; a node none of
    whose ranks reported is named by its neighbours' numbering (``node016``, ``node049``)
    where the names follow the nodes' order, else ``hosts not heard from``."""
    c = job.cols
    present = job.present()
    if not len(present):
        return [f"{rank_word(missing)}"]
    per_node = int(c.local_rank[present].max()) + 1
    nodes, first = np.unique(present // per_node, return_index=True)
    named = {
        node: job.host_name(int(c.host[present[i]])) for node, i in zip(nodes.tolist(), first.tolist(), strict=True)
    }
    numbering = _numbering(named)
    on_known: dict[str, list[int]] = defaultdict(list)
    runs: list[list[int]] = []
    """Ranks of nodes none of whose ranks reported, a list per run of consecutive nodes."""
    unknown: list[int] = []
    for rank in missing:
        node = rank // per_node
        if node in named:
            on_known[named[node]].append(rank)
        elif numbering is None:
            unknown.append(rank)
        elif runs and runs[-1][-1] // per_node >= node - 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    phrases = [(ranks, host) for host, ranks in on_known.items()]
    for ranks in runs:
        assert numbering is not None
        low, high = numbering(ranks[0] // per_node), numbering(ranks[-1] // per_node)
        phrases.append((ranks, low if low == high else f"{low}-{high}"))
    if unknown:
        phrases.append((unknown, "hosts not heard from"))
    phrases.sort(key=lambda phrase: (-len(phrase[0]), phrase[0][0]))
    return [f"{rank_word(ranks)} on {hosts}" for ranks, hosts in phrases]


def _numbering(named: dict[int, str]) -> Callable[[int], str] | None:
    """The host of node ``n`` where every host heard from is a common prefix and the node's
    number plus one offset, zero-padded alike (``node017`` is node 16 of ``node001``'s
    numbering): None where they are not."""
    parsed = [(node, re.fullmatch(r"(.*?)(\d+)", host)) for node, host in named.items()]
    if not parsed or any(m is None for _, m in parsed):
        return None
    matches = [(node, m) for node, m in parsed if m is not None]
    prefixes = {m.group(1) for _, m in matches}
    widths = {len(m.group(2)) for _, m in matches}
    offsets = {int(m.group(2)) - node for node, m in matches}
    if len(prefixes) != 1 or len(offsets) != 1 or len(widths) != 1:
        return None
    prefix, offset, width = prefixes.pop(), offsets.pop(), widths.pop()
    return lambda node: f"{prefix}{node + offset:0{width}d}"
