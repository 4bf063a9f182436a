"""Each rank's latest report: kept as the bytes it came in, decoded only when someone asks for
it (a stack, an exception, a row on the screen), and read together with the rank's numbers in
the columns, which are always the latest.

A rank reporting straight to the monitor sends its whole report every interval, so the two
agree. Through a relay (:mod:`distmon.wire.column_batch`), its header and rows come every interval and
its whole report only when it has news, when the monitor asked for it, or now and then; the
report kept may then be older than the numbers, and what is asked for is the kept report with
the numbers its frame's header and rows carry brought up to date (:func:`up_to_date`). What
only the whole report says (CPU used, GPU utilization, a loader's wait) is as of that report,
and the ranks asked for are remembered (:attr:`Reports.asked`) so that the monitor can ask
their relays for their whole reports from then on.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from typing import Any

import numpy as np

from distmon import wire
from distmon.monitor.state.columns import Columns
from distmon.wire import GroupStatus, Report, WireError

DECODED = 4096
"""Reports kept decoded, the most recently asked for."""


class Reports:
    """The latest report of each rank, as received, by rank; with what was learned reading
    them (host names and groups, by their hashes) and the ranks asked for since the last look."""

    def __init__(self) -> None:
        self.raw: list[bytes | None] = []
        self.names: dict[int, str] = {}
        """Host names by :func:`~distmon.wire.name_hash`."""
        self.groups: dict[int, GroupStatus] = {}
        """A member's description of each group, by the hash of its id."""
        self.asked: set[int] = set()
        """Ranks whose report was asked for since :meth:`take_asked`."""
        self._decoded: OrderedDict[int, tuple[int, Report]] = OrderedDict()

    def reserve(self, capacity: int) -> None:
        self.raw.extend([None] * (capacity - len(self.raw)))

    def keep(self, ranks: list[int], payload: bytes, starts: list[int], ends: list[int]) -> None:
        """The reports of ``ranks`` at ``payload[starts[i]:ends[i]]``."""
        raw = self.raw
        for rank, start, end in zip(ranks, starts, ends, strict=True):
            raw[rank] = payload[start:end]

    def forget(self, ranks: list[int]) -> None:
        """``ranks`` have a new process whose report has not come yet."""
        for rank in ranks:
            self.raw[rank] = None

    def take_asked(self) -> set[int]:
        asked, self.asked = self.asked, set()
        return asked

    def get(self, rank: int, cols: Columns, job: str | None, world: int, dropped: Counter[str]) -> Report:
        """Rank ``rank``'s report as of its latest numbers, decoded once per report that came
        and kept among the last :data:`DECODED` asked for. One that does not decode is counted
        in ``dropped`` as ``malformed``; a rank none came from yet (its relay has had no news
        of it since the monitor started) is its numbers alone."""
        self.asked.add(rank)
        seq = int(cols.seq[rank])
        hit = self._decoded.get(rank)
        if hit is not None and hit[0] == seq:
            self._decoded.move_to_end(rank)
            return hit[1]
        raw = self.raw[rank] if 0 <= rank < len(self.raw) else None
        report = None
        if raw is not None:
            try:
                report = wire.decode(raw)
            except WireError:
                dropped["malformed"] += 1
        if report is None:
            host = self.names.get(int(cols.host[rank]), "?")
            report = Report(job=job or "", rank=rank, world=world, host=host, pid=0, t=0.0, n=0, interval=1.0)
        else:
            self.names.setdefault(wire.name_hash(report.host), report.host)
            for g in report.groups:
                self.groups.setdefault(wire.name_hash(g.id), g)
        report = up_to_date(report, cols, rank)
        self._decoded[rank] = (seq, report)
        if len(self._decoded) > DECODED:
            self._decoded.popitem(last=False)
        return report


def _value(x: Any) -> float | None:
    return None if np.isnan(x) else float(x)


def _count(x: Any) -> int | None:
    return None if np.isnan(x) else int(x)


def up_to_date(report: Report, c: Columns, rank: int) -> Report:
    """``report`` with the numbers of ``rank``'s latest frame: the same report if it came with
    that frame, else a copy with what that frame's header and rows say (its time and counts,
    steps, the stall, memory, every group's sequence numbers and every channel's ops)."""
    t = float(c.t[rank])
    if report.t == t:
        return report
    r = dataclasses.replace(
        report,
        pid=int(c.pid[rank]),
        local_rank=int(c.local_rank[rank]),
        t=t,
        n=int(c.n[rank]),
        interval=float(c.interval[rank]),
        steps=int(c.steps[rank]),
        forwards=int(c.forwards[rank]),
        last_step_t=_value(c.last_step_t[rank]),
        stalled_since=_value(c.stalled_since[rank]),
        data_wait=_value(c.data_wait[rank]),
    )
    p50 = _value(c.step_p50[rank])
    if r.step_time is not None and p50 is not None:
        r.step_time = dataclasses.replace(r.step_time, p50=p50)
    rss = _count(c.rss[rank])
    if r.memory is not None and rss is not None:
        r.memory = dataclasses.replace(r.memory, rss=rss)
    if r.gpu is not None:
        r.gpu = dataclasses.replace(
            r.gpu,
            used=_count(c.gpu_used[rank]),
            reserved=_count(c.gpu_reserved[rank]),
            allocated=_count(c.gpu_allocated[rank]),
            total=_count(c.gpu_total[rank]),
        )
    r.groups = [_group(g, c, rank, k) for k, g in enumerate(r.groups)]
    r.p2p = [_channel(p, c, rank, k) for k, p in enumerate(r.p2p)]
    return r


def _group(g: GroupStatus, c: Columns, rank: int, slot: int) -> GroupStatus:
    if slot >= int(c.groups[rank]) or int(c.g_id[rank, slot]) != wire.name_hash(g.id):
        return g
    op = int(c.g_op[rank, slot])
    return dataclasses.replace(
        g,
        enqueued=int(c.g_enq[rank, slot]),
        completed=int(c.g_comp[rank, slot]),
        since=_value(c.g_since[rank, slot]),
        op=g.op if op and g.op and wire.name_hash(g.op) == op else None,
    )


def _channel(p: wire.P2P, c: Columns, rank: int, slot: int) -> wire.P2P:
    key = (wire.name_hash(p.group), p.peer, 0 if p.dir == wire.SEND else 1)
    if slot >= int(c.channels[rank]):
        return p
    if (int(c.c_group[rank, slot]), int(c.c_peer[rank, slot]), int(c.c_dir[rank, slot])) != key:
        return p
    blocked = int(c.c_blocked[rank, slot])
    return dataclasses.replace(
        p,
        posted=int(c.c_posted[rank, slot]),
        completed=int(c.c_completed[rank, slot]),
        blocked=None if blocked < 0 else blocked,
        blocked_since=_value(c.c_blocked_since[rank, slot]),
    )
