"""What the monitor knows about a job: each rank's latest numbers, a short history of them and
its latest report, and the facts read off them, each defined once here (a rank's GPU
memory, whether it is silent, how long ago a moment on its clock was, whether it failed on
its own; how the job ended). The rules, the terminal UI, the reports and the exporters only
format these.

The numbers are kept in columns, an array per field over the ranks (:class:`Columns`),
filled from a whole batch at once: frames straight from ranks read as arrays
(:mod:`distmon.columnar.frames`), or a relay's columns (:mod:`distmon.columnar.batch`), both
the one way in (:meth:`JobState.ingest_batch`). Taking in the reports of 131,072 ranks a second
costs a few array operations per batch, and a rule that looks at every rank looks at an array.
A rank's whole report (its stack, its exception) is kept as the bytes it came in and decoded
only when someone asks (:attr:`RankState.report`, :mod:`distmon.monitor.state.reports`).
:class:`RankState` is a view of one rank over the columns.

Memory is bounded by design: a fixed set of numbers and one report per rank, so a
4096-rank job costs the same after an hour as after a minute; and only reports that fit
the job are admitted (:mod:`distmon.monitor.state.admission`), so no sender can add ranks.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.columnar.batch import ColumnBatch
from distmon.columnar.frames import Parsed, parse
from distmon.link import RELAY_DROPPED, Batch, Relay
from distmon.monitor.state import admission
from distmon.monitor.state.alerts import CRITICAL, Alert
from distmon.monitor.state.arrays import distinct
from distmon.monitor.state.columns import ALL, F8, HISTORY, I8, INITIAL, Columns, History
from distmon.monitor.state.ending import FAILURE_KINDS, STOP_KINDS, Ending
from distmon.monitor.state.limits import LIMITS, Thresholds
from distmon.monitor.state.reports import Reports
from distmon.monitor.state.statuses import EXITED, FAILED, OK, SEVERITY, SILENT, STALLED, STOPPED, WORKER, stop
from distmon.monitor.state.words import duration, rank_word
from distmon.wire import TERMINATED, GroupStatus, Report, WireError

SHARE_SMOOTHING = 0.15
"""Weight of the newest report in the running shares: about the last dozen reports count."""
DELAY_CREEP = 0.1
"""How much of an interval a rank's usual delay (:meth:`JobState.held_up`) may rise by each
report: a lasting change (its clock stepped back, a slower path for good) becomes the usual
within tens of reports instead of holding the rank up for ever."""
GROUP_COLUMNS = tuple(zip(Columns.GROUP_FIELDS, (name for name, _ in wire.GROUP_FIELDS), strict=True))
"""(column, field): the column that keeps each field of a report's group rows, the columns
being in the order of the wire's fields."""
CHANNEL_COLUMNS = tuple(zip(Columns.CHANNEL_FIELDS, (name for name, _ in wire.CHANNEL_FIELDS), strict=True))
"""(column, field), the same for its point-to-point channel rows."""


class JobState:
    """The ranks of the one job this monitor follows.

    The first job to report is followed; a report from another job is counted and dropped,
    unless the followed job has ended, in which case the new one replaces it (the same
    monitor across a relaunch). Its first admitted report fixes the job's world size until
    it ends; ``dropped`` counts refusals by reason.
    """

    def __init__(self, job: str | None = None, pinned: bool = False, max_world: int = admission.MAX_WORLD) -> None:
        self.job = job
        self.pinned = pinned
        self.max_world = max_world
        self.dropped: Counter[str] = Counter()
        self.unwatched: Counter[str] = Counter()
        """Seconds the monitor did not watch, by why (:mod:`distmon.monitor.state.unwatched`)."""
        self.lost_on_the_way: Counter[str] = Counter()
        """Reports relays dropped (their upstream slow), by the host of the relay that dropped
        them: whose silence is the path's. Live only; a recording keeps the total, under
        ``dropped[RELAY_DROPPED]``."""
        self.received = 0
        self.last_message: float | None = None
        self.job_world: int | None = None
        self.retained = 0
        """Bytes of the ranks' reports kept, as received."""
        self.reporting = 0
        self.cols = Columns(INITIAL)
        self.ranks = Ranks(self)
        self.relays: list[Relay] = []
        """Relays the ranks' reports came through, by the index in ``cols.via``."""
        self.relay_heard: list[float] = []
        """Per relay, when a batch last named it (an empty one is a relay's sign of life)."""
        self._relay_of: dict[Relay, int] = {}
        self._job_hash = wire.name_hash(job) if job is not None else None
        self.reports = Reports()

    # --- taking reports in ------------------------------------------------------------------

    def ingest(self, raw: bytes, now: float) -> RankState | None:
        """Take in one message (a frame, or a bare report); a bad or refused one is counted by
        reason, never raised. Returns the rank it was admitted for."""
        _, ranks = self._take(Batch.of([raw]), now, None)
        return RankState(self, int(ranks[0])) if len(ranks) else None

    def apply(self, report: Report, now: float) -> bool:
        """Take in ``report`` as if it had just arrived (tests build states this way)."""
        return self.ingest(wire.encode(report), now) is not None

    def ingest_batch(self, batch: Batch | ColumnBatch, now: float, times: F8 | None = None) -> I8:
        """Take in a batch of frames, or a relay's columns (``times[i]`` when frame ``i``
        arrived, ``now`` for all by default), each admitted or counted by why not; returns the
        indices of the frames admitted."""
        return self._take(batch, now, times)[0]

    def _take(self, batch: Batch | ColumnBatch, now: float, times: F8 | None) -> tuple[I8, I8]:
        """The indices of the frames admitted, and their ranks."""
        if batch.relays:
            heard = now if times is None or not len(times) else max(now, float(np.max(times)))
            for relay in batch.relays:
                i = self._relay_index(relay)
                self.relay_heard[i] = max(self.relay_heard[i], heard)
        if batch.dropped:
            losses = batch.losses()
            self.dropped[RELAY_DROPPED] += sum(losses.values())
            self.lost_on_the_way.update({relay.host: n for relay, n in losses.items()})
        parsed = parse(batch) if isinstance(batch, Batch) else batch.parsed()
        self.dropped.update(+parsed.refused)
        if len(parsed) == 0:
            return parsed.index, parsed.index
        arrived = np.full(len(parsed), now) if times is None else np.asarray(times, dtype=np.float64)[parsed.index]
        keep = self._admit(parsed, arrived)
        if keep.any():
            self._apply(parsed, np.flatnonzero(keep), arrived, batch.relays)
        return parsed.index[keep], parsed.headers["rank"][keep].astype(np.int64)

    def _admit(self, parsed: Parsed, arrived: F8) -> npt.NDArray[np.bool_]:
        """Which frames the job lets in; the others are counted by reason."""
        h = parsed.headers
        keep = np.ones(len(parsed), dtype=bool)
        fits = (h["world"] >= 1) & (h["world"] <= self.max_world) & (h["rank"] >= 0) & (h["rank"] < h["world"])
        while fits.any():
            i = int(np.argmax(fits))
            first, ended = h[i], self._job_hash is not None and self.ended(float(arrived[i]))
            another = first["job"] != self._job_hash and not self.pinned
            resized = first["job"] == self._job_hash and self.job_world is not None and first["world"] != self.job_world
            if not (self._job_hash is None or (ended and (another or resized))):
                break
            try:
                self._follow(parsed, i)  # the first job, a new one after it ended, or it relaunched at another size
                break
            except wire.WireError:  # its header fits, its report does not decode: dropped, the next one judged
                self.dropped["malformed"] += 1
                keep[i] = fits[i] = False
        if self._job_hash is not None:
            other = (h["job"] != self._job_hash) & keep
            self._refuse("other_job", other)
            keep &= ~other
        rank, world = h["rank"].astype(np.int64), h["world"].astype(np.int64)
        cols = self.cols
        known = (rank >= 0) & (rank < cols.capacity)
        current = np.where(known, rank, 0)
        alive = known & cols.present[current]
        other_process = alive & ((cols.pid[current] != h["pid"]) | (cols.host[current] != h["host"]))
        gone = ((cols.flags[current] & wire.FLAG_EXITED) != 0) | (
            arrived - cols.received[current] >= admission.restart_quiet(cols.interval[current])
        )
        churn = other_process & ~gone
        reason = admission.refusals(world, rank, self.job_world, self.max_world, churn & keep)
        for code in np.unique(reason[keep & (reason > 0)]):
            self._refuse(str(admission.REASONS[code]), keep & (reason == code))
        keep &= reason == 0
        if keep.any():
            old = np.where(alive, cols.bytes[current], 0)
            added = np.where(parsed.has_report(), parsed.sizes() - old, 0)
            total = self.retained + np.cumsum(np.where(keep, added, 0))
            over = keep & (total > admission.MAX_RETAINED_BYTES)
            self._refuse(admission.OVER_BUDGET, over)
            keep &= ~over
        return keep

    def _refuse(self, reason: str, frames: npt.NDArray[np.bool_]) -> None:
        n = int(np.count_nonzero(frames))
        if n:
            self.dropped[reason] += n

    def _follow(self, parsed: Parsed, i: int) -> None:
        """Follow the job of frame ``i``: forget the one before. Its name is its report's; a
        relay's frame may come without it, and the name then comes with the first report of the
        job that does (:meth:`_learn_names`)."""
        job = wire.decode(parsed.report(i)).job if parsed.has_report()[i] else None
        self.job, self._job_hash = job, int(parsed.headers["job"][i])
        self.job_world = int(parsed.headers["world"][i])
        self.cols = Columns(INITIAL)
        self.reports = Reports()
        self.retained = self.reporting = 0

    def _apply(self, parsed: Parsed, frames: I8, arrived: F8, relays: list[Any]) -> None:
        """Every admitted frame, in order: a rank's second frame in the batch goes in a round
        after its first (arrays take one value per rank at a time)."""
        rank = parsed.headers["rank"][frames].astype(np.int64)
        order = np.argsort(rank, kind="stable")
        first = np.r_[True, rank[order][1:] != rank[order][:-1]]
        starts = np.flatnonzero(first)
        occurrence = np.empty(len(rank), dtype=np.int64)
        occurrence[order] = np.arange(len(rank)) - np.repeat(starts, np.diff(np.r_[starts, len(rank)]))
        for k in range(int(occurrence.max()) + 1):
            mine = frames[occurrence == k]
            self._apply_once(parsed, mine, arrived[mine], relays)

    def _apply_once(self, parsed: Parsed, frames: I8, arrived: F8, relays: list[Any]) -> None:
        """Frames of distinct ranks."""
        h = parsed.headers[frames]
        rank = h["rank"].astype(np.int64)
        cols = self.cols
        cols.reserve(max(int(rank.max()) + 1, self.job_world or 0))
        self.reports.reserve(cols.capacity)
        was_present = cols.present[rank]
        new = ~was_present | (cols.pid[rank] != h["pid"]) | (cols.host[rank] != h["host"])
        if new.any():
            self.reporting += int(np.count_nonzero(~was_present))
            self.retained -= int(cols.bytes[rank[new]].sum())
            self.reports.forget(rank[new & was_present].tolist())
            cols.forget(rank[new])
            cols.first_seen[rank[new]] = arrived[new]
            cols.present[rank[new]] = True
        sent = parsed.has_report()[frames]
        sizes = np.where(sent, parsed.sizes()[frames], cols.bytes[rank])
        self.retained += int(np.sum(sizes - cols.bytes[rank]))
        cols.seq[rank] = self.received + 1 + np.arange(len(frames))
        self.received += len(frames)
        self.last_message = float(arrived.max())
        cols.received[rank] = arrived
        creep = DELAY_CREEP * np.nan_to_num(h["interval"], nan=1.0)
        cols.least_delay[rank] = np.fmin(cols.least_delay[rank] + creep, arrived - h["t"])
        for name in ("t", "n", "pid", "host", "local_rank", "steps", "forwards", "flags", "stack"):
            getattr(cols, name)[rank] = h[name]
        for name in ("interval", "data_wait", "step_p50", "stalled_since", "last_step_t", "rss"):
            getattr(cols, name)[rank] = h[name]
        for name in ("gpu_used", "gpu_reserved", "gpu_allocated", "gpu_total"):
            getattr(cols, name)[rank] = h[name]
        cols.bytes[rank] = sizes
        cols.report_t[rank[sent]] = h["t"][sent]
        cols.via[rank] = self._relay_indices(parsed.via[frames], relays)
        inflight = self._rows(parsed, frames, rank)
        self._shares(rank, h, inflight)
        self._history(rank, h, inflight)
        kept = frames[sent]
        starts, ends = parsed.report_start[kept].tolist(), parsed.report_end[kept].tolist()
        self.reports.keep(rank[sent].tolist(), parsed.payload, starts, ends)
        self._learn_names(h["host"][sent], rank[sent])

    def _learn_names(self, hosts: npt.NDArray[np.uint64], rank: I8) -> None:
        """From the reports just kept (of ``rank``, on ``hosts``): the job's name if a relay's
        frames without reports made it followed, and the names of hosts not seen before, a report
        of each read for its name: the table of 131,072 ranks groups them by node name, without
        decoding a report a rank."""
        raw, names = self.reports.raw, self.reports.names
        if self.job is None and len(rank):
            with contextlib.suppress(WireError):
                report = wire.decode(raw[int(rank[0])] or b"")
                if wire.name_hash(report.job) == self._job_hash:
                    self.job = report.job
        values, first = np.unique(hosts, return_index=True)
        for host, i in zip(values.tolist(), first.tolist(), strict=True):
            if host not in names:
                name = wire.host_of(raw[int(rank[i])] or b"")
                if name is not None and wire.name_hash(name) == host:
                    names[host] = name

    def _relay_indices(self, via: I8, relays: list[Any]) -> I8:
        """The batch's relay indices as indices into :attr:`relays`."""
        if not relays:
            return np.full(len(via), -1, dtype=np.int64)
        mine = np.array([self._relay_index(relay) for relay in relays] + [-1], dtype=np.int64)
        return mine[via]

    def _relay_index(self, relay: Relay) -> int:
        i = self._relay_of.get(relay)
        if i is None:
            i = self._relay_of[relay] = len(self.relays)
            self.relays.append(relay)
            self.relay_heard.append(-math.inf)
        return i

    def _rows(self, parsed: Parsed, frames: I8, rank: I8) -> npt.NDArray[np.bool_]:
        """Group and channel rows into the ranks' slots, and what the ranks wait in read off
        them once here, not by every tick; whether each frame's rank had a collective in
        flight."""
        cols = self.cols
        position = np.full(len(parsed), -1, dtype=np.int64)
        position[frames] = np.arange(len(frames))
        h = parsed.headers[frames]
        cols.widen(int(h["groups"].max(initial=0)), int(h["channels"].max(initial=0)))
        cols.groups[rank], cols.channels[rank] = h["groups"], h["channels"]
        for of, slots, table, fields in (
            (parsed.group_of, parsed.group_slot, parsed.groups, GROUP_COLUMNS),
            (parsed.channel_of, parsed.channel_slot, parsed.channels, CHANNEL_COLUMNS),
        ):
            owner = position[of]
            rows = owner >= 0
            if rows.any():
                found, who, slot = table[rows], rank[owner[rows]], slots[rows]
                for column, name in fields:
                    getattr(cols, column)[who, slot] = found[name]
        used = max(1, int(cols.groups[rank].max(initial=0)))
        flying = (np.arange(used) < cols.groups[rank, None]) & (cols.g_enq[rank, :used] > cols.g_comp[rank, :used])
        since = np.where(flying & ~np.isnan(cols.g_since[rank, :used]), cols.g_since[rank, :used], np.inf)
        oldest = since.argmin(axis=1)
        first = since[np.arange(len(rank)), oldest]
        cols.in_collective[rank] = flying.any(axis=1)
        cols.collective_since[rank] = np.where(np.isfinite(first), first, np.nan)
        cols.collective_slot[rank] = oldest
        used = int(cols.channels[rank].max(initial=0))
        blocked = (np.arange(used) < cols.channels[rank, None]) & (cols.c_blocked[rank, :used] >= 0)
        cols.in_p2p[rank] = blocked.any(axis=1)
        inflight: npt.NDArray[np.bool_] = cols.in_collective[rank]
        return inflight

    def _shares(self, rank: I8, h: npt.NDArray[np.void], inflight: npt.NDArray[np.bool_]) -> None:
        """Running shares of time in collectives and waiting for data, while the rank progresses.
        A stall is the hang rule's business, not pace: a stalled report starts the shares over,
        so the seconds of waiting before the stall was flagged do not make the rank that held
        everyone up look, once back, like the one that waits least."""
        cols = self.cols
        moving = (h["flags"] & wire.FLAG_STALLED) == 0
        cols.samples[rank[~moving]] = 0
        r = rank[moving]
        weight = np.where(cols.samples[r] > 0, SHARE_SMOOTHING, 1.0)
        cols.inflight_share[r] += weight * (inflight[moving] - cols.inflight_share[r])
        wait = h["data_wait"][moving].astype(np.float64)
        wait[np.isnan(wait)] = 0.0
        cols.data_wait_share[r] += weight * (wait - cols.data_wait_share[r])
        cols.samples[r] += 1

    def _history(self, rank: I8, h: npt.NDArray[np.void], inflight: npt.NDArray[np.bool_]) -> None:
        cols = self.cols
        slot = cols.history_next[rank]
        values = {
            "t": h["t"],
            "steps": h["steps"].astype(np.float64),
            "step_time": h["step_p50"],
            "rss": h["rss"],
            "gpu": np.where(np.isnan(h["gpu_allocated"]), h["gpu_used"], h["gpu_allocated"]),
            "inflight": inflight.astype(np.float64),
            "data_wait": h["data_wait"],
        }
        for metric, value in values.items():
            cols.history[metric][slot, rank] = value
        cols.history_next[rank] = (slot + 1) % HISTORY
        cols.history_count[rank] += 1

    # --- reading ----------------------------------------------------------------------------

    def present(self) -> I8:
        """The ranks heard from, in order."""
        return np.flatnonzero(self.cols.present)

    def views(self, ranks: npt.NDArray[np.bool_] | I8) -> list[RankState]:
        """The ranks of a mask over ranks (or an array of ranks), as views, in order: the
        rules pick the few ranks worth a look off the columns, then read those."""
        chosen = np.flatnonzero(ranks) if ranks.dtype == np.bool_ else ranks
        return [RankState(self, rank) for rank in chosen.tolist()]

    def report_of(self, rank: int) -> Report:
        """Rank ``rank``'s latest report as of its latest numbers (see
        :mod:`distmon.monitor.state.reports`), decoded once and kept among the last few asked
        for; KeyError for a rank not heard from."""
        c = self.cols
        if not (0 <= rank < c.capacity and c.present[rank]):
            raise KeyError(rank)
        return self.reports.get(rank, c, self.job, self.world, self.dropped)

    def wanted(self) -> list[int]:
        """Ranks whose whole reports the monitor wants from their relays: those asked for since
        the last call, and those heard from whose report has not come (it started late)."""
        c = self.cols
        missing = np.flatnonzero(c.present & np.isnan(c.report_t) & (c.via >= 0))
        return sorted(self.reports.take_asked().union(missing.tolist()))

    def host_name(self, host: int) -> str:
        """A host's name, from a report of one of its ranks."""
        name = self.reports.names.get(host)
        if name is None:
            c = self.cols
            ranks = np.flatnonzero(c.present & (c.host == host))
            reported = ranks[~np.isnan(c.report_t[ranks])]
            ranks = reported if len(reported) else ranks
            name = self.report_of(int(ranks[0])).host if len(ranks) else "?"
        return name

    def group(self, gid: int) -> GroupStatus | None:
        """A group's description (its name, members, timeout), from a report of a member."""
        found = self.reports.groups.get(gid)
        if found is None:
            members = np.flatnonzero((self.cols.g_id == gid).any(axis=1) & self.cols.present)
            for rank in members[:1].tolist():
                self.report_of(rank)
            found = self.reports.groups.get(gid)
        return found

    def group_id(self, gid: int, rank: int | None = None) -> str:
        """The id of the group whose hash is ``gid``: from its description, else from the
        channels of ``rank``'s report (a group only point-to-point traffic names)."""
        found = self.group(gid)
        if found is not None:
            return found.id
        if rank is not None:
            for c in self.report_of(rank).p2p:
                if wire.name_hash(c.group) == gid:
                    return c.group
        return f"#{gid:x}"

    def blocked(self, ranks: I8) -> npt.NDArray[np.bool_]:
        """Per rank of ``ranks`` and channel slot: blocked in a send or receive."""
        c = self.cols
        rows = np.arange(c.channel_slots)[None, :] < c.channels[ranks, None]
        mask: npt.NDArray[np.bool_] = rows & (c.c_blocked[ranks] >= 0)
        return mask

    def ages(self, t: F8, now: float, ranks: I8 | None = None) -> F8:
        """:meth:`RankState.age` over ranks (all, or ``ranks``; ``t`` a value or a row of
        values per rank, on the rank's own clock)."""
        c = self.cols
        pick: I8 | slice = slice(None) if ranks is None else ranks
        offset = c.t[pick] + (now - c.received[pick])
        ages: F8 = (offset[:, None] if t.ndim == 2 else offset) - t
        return ages

    @property
    def world(self) -> int:
        return self.job_world or 0

    @property
    def hosts(self) -> list[str]:
        return sorted({self.host_name(int(h)) for h in distinct(self.cols.host[self.present()])})

    def gpu_used(self, ranks: I8 | slice = ALL) -> F8:
        """Per rank (of ``ranks``): NVML's used memory, else what torch's allocator reserved
        (NaN: no GPU)."""
        c = self.cols
        nvml = c.gpu_used[ranks]
        used: F8 = np.where(np.isnan(nvml), c.gpu_reserved[ranks], nvml)
        return used

    def gpu_allocated(self, ranks: I8 | slice = ALL) -> F8:
        c = self.cols
        torch = c.gpu_allocated[ranks]
        allocated: F8 = np.where(np.isnan(torch), c.gpu_used[ranks], torch)
        return allocated

    def gpu_total(self) -> F8:
        """Per rank: its GPU's memory (NaN: no GPU, or none reported)."""
        total: F8 = gpu_total(self.cols.gpu_total)
        return total

    def gpu_util(self, ranks: I8) -> F8:
        """Of ``ranks``: the utilization of each one's GPU, 0 to 100, from its latest report
        (NaN: none). The header does not carry it; the reports are read for it, not kept
        decoded."""
        reports = self.reports.raw
        util = [wire.gpu_util(raw) if r < len(reports) and (raw := reports[r]) else None for r in ranks.tolist()]
        return np.array(util, dtype=np.float64)

    def raw_reports(self) -> tuple[bytes | None, ...]:
        """By rank: the report kept of each as received (immutable bytes), copied."""
        return tuple(self.reports.raw)

    def silent_for(self, now: float) -> F8:
        """Per rank: seconds since its latest report arrived."""
        since: F8 = now - self.cols.received
        return since

    def collective_age(self, now: float) -> F8:
        """Per rank: how long its oldest collective has been in flight, on its own clock (see
        :meth:`RankState.age`); NaN when none is."""
        age: F8 = self.ages(self.cols.collective_since, now)
        return age

    def flagged(self, flag: int, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): heard from, and its latest report's header carries ``flag``."""
        c = self.cols
        mask: npt.NDArray[np.bool_] = c.present[ranks] & ((c.flags[ranks] & flag) != 0)
        return mask

    def lost_relays(self, now: float, limits: Thresholds = LIMITS) -> dict[int, I8]:
        """Relays gone silent, by index, with the ranks last heard through them: not heard for
        longer than those ranks' reports allow, and every such rank silent (ranks heard again,
        through the relay restarted or another, no longer count)."""
        lost: dict[int, I8] = {}
        if not self.relays:
            return lost
        c = self.cols
        behind = c.present & ~self.flagged(wire.FLAG_EXITED) & (c.via >= 0)
        silent = self.silent(now, limits)
        for i in distinct(c.via[behind]).tolist():
            ranks = np.flatnonzero(behind & (c.via == i))
            after = limits.silent_after(float(np.nanmax(c.interval[ranks])))
            if now - self.relay_heard[i] >= after and silent[ranks].all():
                lost[i] = ranks
        return lost

    def silent(self, now: float, limits: Thresholds = LIMITS, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): heard from, not exited, and silent longer than its reports
        allow."""
        c = self.cols
        after = limits.silent_after(c.interval[ranks])
        exited = self.flagged(wire.FLAG_EXITED, ranks)
        mask: npt.NDArray[np.bool_] = c.present[ranks] & ~exited & (now - c.received[ranks] >= after)
        return mask

    def live(self, now: float, limits: Thresholds = LIMITS) -> npt.NDArray[np.bool_]:
        mask: npt.NDArray[np.bool_] = self.cols.present & ~self.flagged(wire.FLAG_EXITED) & ~self.silent(now, limits)
        return mask

    def stalled(self, now: float, limits: Thresholds = LIMITS) -> npt.NDArray[np.bool_]:
        """Per rank: live, no exception raised, and making no progress by its own account."""
        mask: npt.NDArray[np.bool_] = (
            self.live(now, limits) & ~self.flagged(wire.FLAG_RAISED) & self.flagged(wire.FLAG_STALLED)
        )
        return mask

    def failed_on_their_own(self) -> npt.NDArray[np.bool_]:
        """Per rank: raised, and not only because the job was being stopped around it (a rank
        stopped by a signal whose peers or DataLoader workers went in the same teardown did not
        fail)."""
        teardown = self.flagged(wire.FLAG_STOPPED_BY_SIGNAL) & self.flagged(wire.FLAG_CONSEQUENCE)
        mask: npt.NDArray[np.bool_] = self.flagged(wire.FLAG_RAISED) & ~teardown
        return mask

    def statuses(self, ranks: I8, now: float, limits: Thresholds = LIMITS) -> I8:
        """Each of ``ranks``' status, as its severity (an index into
        :data:`~distmon.monitor.state.statuses.STATUSES`), read off the header flags: the rank
        table sorts and filters 131,072 ranks by it. A rank that raised fails only on its own
        (:meth:`failed_on_their_own`); one stopped around it is stopped."""
        flags = self.cols.flags[ranks]
        severity = np.full(len(ranks), SEVERITY[OK])
        severity[(flags & wire.FLAG_WORKER_DEAD) != 0] = SEVERITY[WORKER]
        severity[(flags & wire.FLAG_STALLED) != 0] = SEVERITY[STALLED]
        severity[self.silent(now, limits, ranks)] = SEVERITY[SILENT]
        stopped = np.where((flags & wire.FLAG_STOPPED_BY_SIGNAL) != 0, SEVERITY[STOPPED], SEVERITY[EXITED])
        severity = np.where((flags & wire.FLAG_EXITED) != 0, stopped, severity)
        severity[self.failed_on_their_own()[ranks]] = SEVERITY[FAILED]
        return severity

    def being_stopped(self) -> bool:
        """Some rank was stopped by a signal: the job is being taken down (killed while hung, or
        torn down after a failure), so its ranks leaving does not resolve what stood."""
        return bool(self.flagged(wire.FLAG_STOPPED_BY_SIGNAL).any())

    def interval(self) -> float:
        """The longest report interval among the ranks (1 s before any reports)."""
        intervals = self.cols.interval[self.present()]
        intervals = intervals[~np.isnan(intervals)]
        return float(intervals.max()) if len(intervals) else 1.0

    def pace(self) -> float | None:
        """The job's median step time; None before any rank has stepped."""
        times = self.cols.step_p50[self.present()]
        times = times[~np.isnan(times)]
        return float(np.median(times)) if len(times) else None

    def ending(self, standing: Iterable[Alert]) -> Ending | None:
        """How the job ended, given the alerts that stand (not resolved); None while it runs.

        A failure alert fails it (even while other ranks still run): the rules that raise them
        have already told the rank that failed first from those that raised because it went
        (:mod:`distmon.monitor.rules.failures`), so their verdict comes first. Before a rule has
        spoken (a recording that ends within a tick of the failure), a rank that raised on its
        own fails it; ranks that only raised on losing a peer are never named as its cause. Once
        every rank has exited, it was stopped (by a signal, while hung if a stop alert stood) or
        it finished."""
        standing = list(standing)
        failures = sorted((a for a in standing if a.kind in FAILURE_KINDS), key=lambda a: a.t)
        if failures:
            return Ending(Ending.FAILED, f"failed: {failures[0].headline}")
        raised = np.flatnonzero(self.failed_on_their_own()).tolist()
        culprits = [r for r in raised if not self.ranks[r].lost_a_peer()]
        if culprits:
            return Ending(Ending.FAILED, f"failed: {rank_word(culprits)} raised an exception")
        if raised:
            return Ending(
                Ending.FAILED, f"failed: {rank_word(raised)} raised on losing a peer, which went without a word"
            )
        present = self.present()
        if not len(present) or not self.flagged(wire.FLAG_EXITED)[present].all():
            return None
        stopped = np.flatnonzero(self.flagged(wire.FLAG_STOPPED_BY_SIGNAL)).tolist()
        if not stopped:
            return Ending(Ending.FINISHED, "finished: every rank exited cleanly")
        how = " and ".join(sorted({stop(e.how).job for r in stopped[:64] if (e := self.report_of(r).exit)}))
        who = f"{rank_word(stopped)} {how}"
        stops = sorted({a.kind for a in standing if a.kind in STOP_KINDS and a.severity == CRITICAL})
        if stops:
            kinds = ", ".join(stops)
            words = f"stopped while hung: {who} while the {kinds} alert stood; it ended with the job, unresolved"
            return Ending(Ending.STOPPED, words)
        return Ending(Ending.STOPPED, f"stopped: {who}")

    def held_up(self, ranks: I8) -> npt.NDArray[np.bool_]:
        """Of ``ranks``, those whose latest report reached the monitor more than two of their
        intervals later than their reports usually take: held up on the way (a relay's queue,
        a sender behind), so it tells where they were, not where they are."""
        c = self.cols
        late = c.received[ranks] - c.t[ranks] - c.least_delay[ranks]
        held: npt.NDArray[np.bool_] = late > 2 * np.nan_to_num(c.interval[ranks], nan=1.0)
        return held

    def ended(self, now: float, quiet: float = 60.0) -> bool:
        """Every rank has exited, or nothing was heard for ``quiet`` seconds."""
        present = self.present()
        if not len(present):
            return True
        if self.flagged(wire.FLAG_EXITED)[present].all():
            return True
        return self.last_message is not None and now - self.last_message > quiet


T = TypeVar("T")


class _Column(Generic[T]):
    """A :class:`RankState` attribute that is one column's value at the rank, as ``kind``."""

    __slots__ = ("column", "kind")

    def __init__(self, column: str, kind: Callable[[Any], T]) -> None:
        self.column, self.kind = column, kind

    @overload
    def __get__(self, rank: None, owner: type[RankState]) -> _Column[T]: ...

    @overload
    def __get__(self, rank: RankState, owner: type[RankState]) -> T: ...

    def __get__(self, rank: RankState | None, owner: type[RankState]) -> T | _Column[T]:
        return self if rank is None else self.kind(rank._get(self.column))


class RankState:
    """One rank, as the monitor knows it: a view of the columns, and its latest report."""

    __slots__ = ("_job", "rank")

    def __init__(self, job: JobState, rank: int) -> None:
        self._job, self.rank = job, rank

    def __repr__(self) -> str:
        return f"RankState(rank={self.rank})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RankState) and other._job is self._job and other.rank == self.rank

    def __hash__(self) -> int:
        return hash((id(self._job), self.rank))

    def _get(self, column: str) -> Any:
        return getattr(self._job.cols, column)[self.rank]

    @property
    def job(self) -> JobState:
        return self._job

    @property
    def _mine(self) -> slice:
        """This rank, as an index into the columns that a fact over ranks takes."""
        return slice(self.rank, self.rank + 1)

    @property
    def report(self) -> Report:
        """The whole latest report, decoded when first asked for."""
        return self._job.report_of(self.rank)

    received = _Column("received", float)
    """Monitor clock when the latest report arrived."""
    first_seen = _Column("first_seen", float)
    inflight_share = _Column("inflight_share", float)
    """Running share of reports sampled inside a collective, while the job progresses:
    low for the rank the others wait for."""
    data_wait_share = _Column("data_wait_share", float)
    size = _Column("bytes", int)
    """Bytes of the latest report as received."""
    steps = _Column("steps", int)

    @property
    def history(self) -> History:
        return History(self._job.cols, self.rank)

    @property
    def host(self) -> str:
        return self._job.host_name(int(self._get("host")))

    @property
    def finished(self) -> bool:
        return bool(self._get("flags") & wire.FLAG_EXITED)

    def silent_for(self, now: float) -> float:
        return now - self.received

    def silent(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Not heard from for longer than its reports allow (and not because it exited): one
        rank of :meth:`distmon.monitor.state.job.JobState.silent`."""
        return bool(self._job.silent(now, limits, self._mine)[0])

    def live(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Still reporting: neither exited nor silent."""
        return not self.finished and not self.silent(now, limits)

    def age(self, t: float, now: float) -> float:
        """How long before ``now`` (the monitor's clock) the moment ``t`` of the rank's own
        clock was: measured on the rank's clock, so skew between hosts does not enter."""
        return float(self._get("t")) - t + (now - self.received)

    def stalled_for(self, now: float) -> float | None:
        """How long the rank has made no progress, by its own account; None while it does."""
        since = float(self._get("stalled_since"))
        return None if np.isnan(since) else self.age(since, now)

    def gpu_used(self) -> float | None:
        """Memory in use on the rank's GPU, as nvidia-smi counts it (NVML), else what torch's
        caching allocator holds; the measure to hold against :meth:`gpu_total`."""
        return present(self._job.gpu_used(self._mine)[0])

    def gpu_total(self) -> float | None:
        return present(float(gpu_total(self._get("gpu_total"))))

    def gpu_allocated(self) -> float | None:
        return present(self._job.gpu_allocated(self._mine)[0])

    def rss(self) -> float | None:
        return present(self._get("rss"))

    def stopped(self) -> bool:
        """Ended by a signal or distmon rather than on its own (see :data:`distmon.wire.STOPPED_HOWS`)."""
        return bool(self._get("flags") & wire.FLAG_STOPPED_BY_SIGNAL)

    def torn_down(self) -> bool:
        """Terminated by SIGTERM: what torchrun does to every survivor once a rank has failed."""
        return self.stopped() and self.report.exit is not None and self.report.exit.how == TERMINATED

    def lost_a_peer(self) -> bool:
        """It raised because a peer went away: a consequence of another rank's failure."""
        return self._raised_for(wire.PEER_LOST)

    def lost_a_worker(self) -> bool:
        """It raised because one of its DataLoader workers died."""
        return self._raised_for(wire.WORKER_DIED)

    def _raised_for(self, consequence: re.Pattern[str]) -> bool:
        """Its exception is one flagged at ingest as a consequence, and its message says which."""
        exc = self.report.exception if self._get("flags") & wire.FLAG_CONSEQUENCE else None
        return exc is not None and bool(consequence.search(exc.message))

    def failed_on_its_own(self) -> bool:
        """Raised, and not only because the job was being stopped around it: a rank stopped by
        a signal whose DataLoader workers died in the same teardown, or whose peers went, did
        not fail."""
        return bool(self._job.failed_on_their_own()[self.rank])


def present(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def gpu_total(total: Any) -> Any:
    """A GPU's memory as reported, an array or one value; NaN for none (a report of 0 is none)."""
    return np.where(total == 0, np.nan, total)


def gpu_allocated(report: Report) -> float | None:
    """Memory held by live tensors (torch's allocator, else NVML's count): what grows when a
    rank leaks. A function of one report, for readers of a recording's reports too."""
    gpu = report.gpu
    if gpu is None:
        return None
    value = gpu.allocated if gpu.allocated is not None else gpu.used
    return None if value is None else float(value)


class Ranks(Mapping[int, RankState]):
    """The ranks heard from, as views, by rank."""

    def __init__(self, job: JobState) -> None:
        self._job = job

    def __getitem__(self, rank: int) -> RankState:
        cols = self._job.cols
        if not (isinstance(rank, int | np.integer) and 0 <= rank < cols.capacity and cols.present[rank]):
            raise KeyError(rank)
        return RankState(self._job, int(rank))

    def __iter__(self) -> Iterator[int]:
        return iter(self._job.present().tolist())

    def __len__(self) -> int:
        return self._job.reporting


def rank_ending(s: RankState, end: float, lost: set[int]) -> str:
    """How one rank ended, in words, for the table of ranks at the end: its last words, else
    what the monitor saw (``lost``: from :func:`gone`), else its silence."""
    r = s.report
    if r.exception is not None:
        first_line = (r.exception.message.strip().splitlines() or [""])[0]
        after = " (after losing a peer)" if s.lost_a_peer() else ""
        return f"raised {r.exception.type}: {first_line[:80]}{after}"
    if r.exit is not None:
        return stop(r.exit.how).rank
    if s.rank in lost:
        return "its process is gone, without last words (killed: see the rank_lost alert)"
    return f"silent for {duration(s.silent_for(end))} at the end" if s.silent(end) else "running"
