"""How a batch of reports goes into the state: the frames the job admits (the rest counted
by reason, :mod:`distmon.monitor.state.admission`), then each admitted frame's numbers into
the columns and its report kept as received, a few array operations per batch whatever its
size. What is read off the numbers once, here rather than by every tick, is written beside
them: what each rank waits in, its pace, its history."""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from typing import Any

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state import facts
from distmon.monitor.state.admission import MAX_RETAINED_BYTES, OVER_BUDGET, REASONS, refusals, restart_quiet
from distmon.monitor.state.columns import DECAY, F8, HISTORY, I8, INITIAL, Columns, gpu_held
from distmon.monitor.state.consequences import judge_new
from distmon.monitor.state.pace import due, holdups, stepping
from distmon.monitor.state.reports import Reports
from distmon.wire import WireError
from distmon.wire.arrays import Parsed, parse
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import RELAY_DROPPED, Batch, Relay

SHARE_SMOOTHING = 0.15
"""Weight of the newest report in the running share of DataLoader wait: about the last dozen
reports count."""
DELAY_CREEP = 0.1
"""How much of an interval a rank's usual delay (:meth:`JobState.held_up`) may rise by each
report: a lasting change (its clock stepped back, a slower path for good) becomes the usual
within tens of reports instead of holding the rank up for ever."""
GROUP_COLUMNS = tuple(zip(Columns.GROUP_FIELDS, (name for name, _ in wire.GROUP_FIELDS), strict=True))
"""(column, field): the column that keeps each field of a report's group rows, the columns
being in the order of the wire's fields."""
CHANNEL_COLUMNS = tuple(zip(Columns.CHANNEL_FIELDS, (name for name, _ in wire.CHANNEL_FIELDS), strict=True))
"""(column, field), the same for its point-to-point channel rows."""


class Admission:
    """What taking reports in writes, owned here: the followed job, the columns and the
    reports kept, the relays heard through, and the counts of what came and what was refused.
    :class:`~distmon.monitor.state.job.JobState` holds one and reads it.

    The first job to report is followed; a report from another job is counted and dropped,
    unless the followed job has ended, in which case the new one replaces it (the same
    monitor across a relaunch). Its first admitted report fixes the job's world size until
    it ends; ``dropped`` counts refusals by reason.
    """

    def __init__(self, job: str | None, pinned: bool, max_world: int) -> None:
        self.job = job
        self.job_hash = wire.name_hash(job) if job is not None else None
        """The followed job's name as headers carry it (:func:`~distmon.wire.name_hash`)."""
        self.job_world: int | None = None
        self.pinned = pinned
        self.max_world = max_world
        """The largest world admitted (a monitor told another's by its catch-up sets it)."""
        self.dropped: Counter[str] = Counter()
        self.lost_on_the_way: Counter[str] = Counter()
        """Reports relays dropped (their upstream slow), by the host of the relay that dropped
        them: whose silence is the path's. Live only; a recording keeps the total, under
        ``dropped[RELAY_DROPPED]``."""
        self.received = 0
        self.last_message: float | None = None
        self.retained = 0
        """Bytes of the ranks' reports kept, as received."""
        self.reporting = 0
        self.cols = Columns(INITIAL)
        self.reports = Reports()
        self.relays: list[Relay] = []
        """Relays the ranks' reports came through, by the index in ``cols.via``."""
        self.relay_heard: list[float] = []
        """Per relay, when a batch last named it (an empty one is a relay's sign of life)."""
        self.relay_of: dict[Relay, int] = {}
        """Each relay's index in :attr:`relays`."""
        self.holdups = holdups(self.cols, stepping(self.cols))
        """Who holds up whom at the job's pace, worked out every second or so of reports as
        they come (:func:`~distmon.monitor.state.pace.due`): at the same moments in a replay,
        whoever reads it when."""
        self._holdups_at = -math.inf

    def take_in(self, batch: Batch | ColumnBatch, now: float, times: F8 | None) -> tuple[I8, I8]:
        """The indices of the frames admitted, and their ranks."""
        if batch.relays:
            via = np.asarray(batch.via)
            for j, relay in enumerate(batch.relays):
                mine = times[via == j] if times is not None and len(times) == len(via) else ()
                heard = float(np.max(mine)) if len(mine) else now  # when its own frames came, merged or not
                i = _relay_index(self, relay)
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
        keep = _admit(self, parsed, arrived)
        if keep.any():
            _apply(self, parsed, np.flatnonzero(keep), arrived, batch.relays)
            cols = self.cols
            if due(self._holdups_at, now, self.reporting) or len(self.holdups.share) != cols.capacity:
                self.holdups, self._holdups_at = holdups(cols, stepping(cols)), now
        return parsed.index[keep], parsed.headers["rank"][keep].astype(np.int64)

    def ended(self, now: float, quiet: float = 60.0) -> bool:
        """Every rank has exited, or nothing was heard for ``quiet`` seconds."""
        c = self.cols
        if not c.present.any():
            return True
        if ((c.flags[c.present] & wire.FLAG_EXITED) != 0).all():
            return True
        return self.last_message is not None and now - self.last_message > quiet


def _admit(admission: Admission, parsed: Parsed, arrived: F8) -> npt.NDArray[np.bool_]:
    """Which frames the job lets in; the others are counted by reason."""
    h = parsed.headers
    keep = np.ones(len(parsed), dtype=bool)
    fits = (h["world"] >= 1) & (h["world"] <= admission.max_world) & (h["rank"] >= 0) & (h["rank"] < h["world"])
    while fits.any():
        i = int(np.argmax(fits))
        first, ended = h[i], admission.job_hash is not None and admission.ended(float(arrived[i]))
        another = first["job"] != admission.job_hash and not admission.pinned
        followed = admission.job_world
        if followed is None and first["job"] == admission.job_hash:  # a job named before it reported
            admission.job_world = int(first["world"])
            break
        resized = first["job"] == admission.job_hash and followed is not None and first["world"] != followed
        if not (admission.job_hash is None or (ended and (another or resized))):
            break
        try:
            _follow(admission, parsed, i)  # the first job, a new one after it ended, or it relaunched at another size
            break
        except wire.WireError:  # its header fits, its report does not decode: dropped, the next one judged
            admission.dropped["malformed"] += 1
            keep[i] = fits[i] = False
    if admission.job_hash is not None:
        other = (h["job"] != admission.job_hash) & keep
        _refuse(admission, "other_job", other)
        keep &= ~other
    rank, world = h["rank"].astype(np.int64), h["world"].astype(np.int64)
    cols = admission.cols
    known = (rank >= 0) & (rank < cols.capacity)
    current = np.where(known, rank, 0)
    alive = known & cols.present[current]
    other_process = alive & ((cols.pid[current] != h["pid"]) | (cols.host[current] != h["host"]))
    gone = ((cols.flags[current] & wire.FLAG_EXITED) != 0) | (
        arrived - cols.received[current] >= restart_quiet(cols.interval[current])
    )
    churn = other_process & ~gone
    # A node's eye reports for a rank it found from outside; once the rank reports itself (its
    # hook attached since), its own reports say more, and the eye's are not taken in.
    found = wire.found_in_flags(h["flags"])
    keep &= ~(found & alive & ~other_process & ~facts.found(cols, current))
    reason = refusals(world, rank, admission.job_world, admission.max_world, churn & keep)
    for code in np.unique(reason[keep & (reason > 0)]):
        _refuse(admission, str(REASONS[code]), keep & (reason == code))
    keep &= reason == 0
    if keep.any():
        old = np.where(alive, cols.bytes[current], 0)
        added = np.where(parsed.has_report(), parsed.sizes() - old, 0)
        total = admission.retained + np.cumsum(np.where(keep, added, 0))
        over = keep & (total > MAX_RETAINED_BYTES)
        _refuse(admission, OVER_BUDGET, over)
        keep &= ~over
    return keep


def _refuse(admission: Admission, reason: str, frames: npt.NDArray[np.bool_]) -> None:
    n = int(np.count_nonzero(frames))
    if n:
        admission.dropped[reason] += n


def _follow(admission: Admission, parsed: Parsed, i: int) -> None:
    """Follow the job of frame ``i``: forget the one before. Its name is its report's; a
    relay's frame may come without it, and the name then comes with the first report of the
    job that does (:func:`_learn_names`)."""
    admission.job = wire.decode(parsed.report(i)).job if parsed.has_report()[i] else None
    admission.job_hash = int(parsed.headers["job"][i])
    admission.job_world = int(parsed.headers["world"][i])
    admission.cols = Columns(INITIAL)
    admission.reports = Reports()
    admission.retained = admission.reporting = 0
    admission.holdups, admission._holdups_at = holdups(admission.cols, stepping(admission.cols)), -math.inf


def _apply(admission: Admission, parsed: Parsed, frames: I8, arrived: F8, relays: list[Any]) -> None:
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
        _apply_once(admission, parsed, mine, arrived[mine], relays)


def _apply_once(admission: Admission, parsed: Parsed, frames: I8, arrived: F8, relays: list[Any]) -> None:
    """Frames of distinct ranks."""
    h = parsed.headers[frames]
    rank = h["rank"].astype(np.int64)
    cols = admission.cols
    cols.reserve(max(int(rank.max()) + 1, admission.job_world or 0))
    admission.reports.reserve(cols.capacity)
    was_present = cols.present[rank]
    new = ~was_present | (cols.pid[rank] != h["pid"]) | (cols.host[rank] != h["host"])
    if new.any():
        admission.reporting += int(np.count_nonzero(~was_present))
        admission.retained -= int(cols.bytes[rank[new]].sum())
        admission.reports.forget(rank[new & was_present].tolist())
        cols.forget(rank[new])
        cols.first_seen[rank[new]] = arrived[new]
        cols.present[rank[new]] = True
    sent = parsed.has_report()[frames]
    sizes = np.where(sent, parsed.sizes()[frames], cols.bytes[rank])
    admission.retained += int(np.sum(sizes - cols.bytes[rank]))
    cols.seq[rank] = admission.received + 1 + np.arange(len(frames))
    admission.received += len(frames)
    admission.last_message = float(arrived.max())
    cols.received[rank] = arrived
    creep = DELAY_CREEP * np.nan_to_num(h["interval"], nan=1.0)
    cols.least_delay[rank] = np.fmin(cols.least_delay[rank] + creep, arrived - h["t"])
    waited = _waiting_since(cols, rank), cols.t[rank]  # as the rank's last report left it
    for name in ("t", "n", "pid", "host", "local_rank", "steps", "forwards", "flags", "stack"):
        getattr(cols, name)[rank] = h[name]
    for name in ("interval", "data_wait", "step_p50", "stalled_since", "last_step_t", "rss"):
        getattr(cols, name)[rank] = h[name]
    for name in ("gpu_used", "gpu_reserved", "gpu_allocated", "gpu_total"):
        getattr(cols, name)[rank] = h[name]
    cols.bytes[rank] = sizes
    cols.report_t[rank[sent]] = h["t"][sent]
    cols.via[rank] = _relay_indices(admission, parsed.via[frames], relays)
    _rows(admission, parsed, frames, rank, waited)
    _history(admission, rank, h, _pace(admission, rank, h))
    kept = frames[sent]
    starts, ends = parsed.report_start[kept].tolist(), parsed.report_end[kept].tolist()
    admission.reports.keep(rank[sent].tolist(), parsed.payload, starts, ends)
    judge_new(cols, admission.reports.raw, rank, h["flags"], sent)
    _learn_names(admission, h["host"][sent], rank[sent])


def _learn_names(admission: Admission, hosts: npt.NDArray[np.uint64], rank: I8) -> None:
    """From the reports just kept (of ``rank``, on ``hosts``): the job's name if a relay's
    frames without reports made it followed, and the names of hosts not seen before, a report
    of each read for its name: the table of 131,072 ranks groups them by node name, without
    decoding a report a rank."""
    raw, names = admission.reports.raw, admission.reports.names
    if admission.job is None and len(rank):
        with contextlib.suppress(WireError):
            report = wire.decode(raw[int(rank[0])] or b"")
            if wire.name_hash(report.job) == admission.job_hash:
                admission.job = report.job
    values, first = np.unique(hosts, return_index=True)
    for host, i in zip(values.tolist(), first.tolist(), strict=True):
        if host not in names:
            name = wire.host_of(raw[int(rank[i])] or b"")
            if name is not None and wire.name_hash(name) == host:
                names[host] = name


def _relay_indices(admission: Admission, via: I8, relays: list[Any]) -> I8:
    """The batch's relay indices as indices into the state's ``relays``."""
    if not relays:
        return np.full(len(via), -1, dtype=np.int64)
    mine = np.array([_relay_index(admission, relay) for relay in relays] + [-1], dtype=np.int64)
    return mine[via]


def _relay_index(admission: Admission, relay: Relay) -> int:
    i = admission.relay_of.get(relay)
    if i is None:
        i = admission.relay_of[relay] = len(admission.relays)
        admission.relays.append(relay)
        admission.relay_heard.append(-math.inf)
    return i


def _rows(admission: Admission, parsed: Parsed, frames: I8, rank: I8, waited: tuple[F8, F8]) -> None:
    """Group and channel rows into the ranks' slots, and what the ranks wait in read off
    them once here, not by every tick; ``waited``: when the wait each rank's last report showed
    began (NaN: none), and that report's time."""
    cols = admission.cols
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
    cols.in_p2p[rank] = _blocked(cols, rank).any(axis=1)
    was, seen = waited
    now = _waiting_since(cols, rank)
    ended = ~np.isnan(was) & ~(now <= was)  # NaN now: out of every wait; later: out of that one
    cols.wait_began[rank[ended]] = was[ended]
    cols.wait_ended[rank[ended]] = seen[ended]


def _waiting_since(cols: Columns, rank: I8) -> F8:
    """Per rank of ``rank``: when the oldest wait it is in began, a collective in flight or a
    send or receive it is blocked in, on its own clock; NaN: none."""
    blocked = _blocked(cols, rank)
    p2p = np.where(blocked, cols.c_blocked_since[rank, : blocked.shape[1]], np.inf).min(axis=1, initial=np.inf)
    since: F8 = np.fmin(cols.collective_since[rank], p2p)  # fmin: NaN where neither
    return np.where(np.isfinite(since), since, np.nan)


def _blocked(cols: Columns, rank: I8) -> npt.NDArray[np.bool_]:
    """Per rank of ``rank``, per channel slot it uses: whether it is blocked in that slot's send
    or receive."""
    used = int(cols.channels[rank].max(initial=0))
    return (np.arange(used) < cols.channels[rank, None]) & (cols.c_blocked[rank, :used] >= 0)


def _pace(admission: Admission, rank: I8, h: npt.NDArray[np.void]) -> F8:
    """A report's samples of its pace since the last (:class:`~distmon.wire.Pace`) into the
    rank's sums (:mod:`distmon.monitor.state.pace`), and its DataLoader wait into its running
    share; returns the share of those samples waiting (NaN: none taken). The rank counts
    samples of its steps only, never of a pause, so a stall or an upload adds nothing."""
    cols = admission.cols
    paced, waited = h["paced"].astype(np.float64), h["waited"].astype(np.float64)
    taken, waits = paced - cols.paced[rank], waited - cols.waited[rank]
    counted = (taken > 0) & (waits >= 0) & (waits <= taken)  # NaN: its first report, or an older rank
    r, n, k = rank[counted], taken[counted, None], waits[counted, None]
    share = np.full(len(rank), np.nan)
    share[counted] = k[:, 0] / n[:, 0]
    for column, value in (("pace_n", n), ("pace_k", k), ("pace_q", k * k / n), ("pace_w", 1.0)):
        getattr(cols, column)[r] = DECAY * getattr(cols, column)[r] + value
    cols.pace_w2[r] = DECAY**2 * cols.pace_w2[r] + 1.0
    cols.paced[rank], cols.waited[rank] = paced, waited
    data = h["data_wait"].astype(np.float64)
    sent = ~np.isnan(data)
    cols.data_wait_share[rank[sent]] += SHARE_SMOOTHING * (data[sent] - cols.data_wait_share[rank[sent]])
    return share


def _history(admission: Admission, rank: I8, h: npt.NDArray[np.void], waiting: F8) -> None:
    cols = admission.cols
    slot = cols.history_next[rank]
    values = {
        "t": h["t"],
        "steps": h["steps"].astype(np.float64),
        "step_time": h["step_p50"],
        "rss": h["rss"],
        "gpu": gpu_held(h["gpu_allocated"], h["gpu_used"]),
        "waiting": waiting,
        "data_wait": h["data_wait"],
    }
    with np.errstate(over="ignore"):  # a value past the column's float32 (a crafted report's) is kept as inf
        for metric, value in values.items():
            cols.history[metric][slot, rank] = value
    cols.history_next[rank] = (slot + 1) % HISTORY
    cols.history_count[rank] += 1
