"""The monitor's numbers, in columns: an array per field over the ranks, filled from a whole
batch at once (:mod:`distmon.wire.column_batch`), with a short history per rank and
metric. A rule that looks at every rank looks at an array; :class:`History` and
:class:`distmon.monitor.state.ranks.RankState` read one rank of them."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

HISTORY = 120
"""Samples kept per rank and metric: two minutes at the default interval."""
METRICS = {"t": "f8", "steps": "f8", "step_time": "f4", "rss": "f4", "gpu": "f4", "waiting": "f4", "data_wait": "f4"}
"""Per-rank time series, each with its type. ``waiting`` is the share of the samples since
the rank's report before found waiting in a collective (:class:`~distmon.wire.Pace`; NaN:
none taken). Times and steps keep every digit; for the rest seven digits are plenty (a
byte count is off by at most a 16-millionth), and the histories, the bulk of the monitor's
memory at 131,072 ranks, take half the room."""
PACE_REPORTS = (30.0, 300.0)
"""The windows over which a rank's pace is taken (:mod:`distmon.monitor.state.pace`), in
reports: each report weighs ``exp(-1 / window)`` times the next, so about the last so many
count. The short one sees a rank turn slow within them; the long one, over minutes, a slowdown
too small to be sure of in half a minute."""
DECAY = np.exp(-1.0 / np.array(PACE_REPORTS))
"""Per window, how much a report weighs against the next."""
SLOTS = 8
"""Group and channel slots a rank starts with, and the step they grow by: every group and
channel a rank reports is kept, the slots growing to the widest rank seen (a 3-D DeviceMesh
with the world group uses four groups, a Megatron-core rank twenty or more; a pipeline
stage two to four channels)."""
INITIAL = 64
"""Ranks there is room for before the first report: the columns grow as higher ranks appear."""

F8 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int64]


Array = npt.NDArray[Any]
ALL = slice(None)


class Columns:
    """The ranks' latest numbers, an array per field, indexed by rank; room for ``capacity``
    ranks, grown as higher ranks appear. Group and channel fields hold a row of slots per
    rank, :attr:`group_slots` and :attr:`channel_slots` wide (grown as a rank reports more
    rows), of which ``groups`` and ``channels`` are in use."""

    SCALARS: ClassVar[dict[str, str]] = {
        "present": "?",
        "received": "f8",
        "least_delay": "f8",
        "first_seen": "f8",
        "t": "f8",
        "n": "i8",
        "interval": "f8",
        "flags": "u1",
        "consequence": "u1",
        "pid": "i8",
        "host": "u8",
        "local_rank": "i8",
        "steps": "i8",
        "forwards": "i8",
        "stalled_since": "f8",
        "last_step_t": "f8",
        "data_wait": "f8",
        "step_p50": "f8",
        "rss": "f8",
        "gpu_used": "f8",
        "gpu_reserved": "f8",
        "gpu_allocated": "f8",
        "gpu_total": "f8",
        "stack": "u8",
        "bytes": "i8",
        "report_t": "f8",
        "seq": "i8",
        "via": "i8",
        "data_wait_share": "f8",
        "paced": "f8",
        "waited": "f8",
        "groups": "i8",
        "channels": "i8",
        "in_collective": "?",
        "collective_since": "f8",
        "collective_slot": "i8",
        "in_p2p": "?",
        "wait_began": "f8",
        "wait_ended": "f8",
        "history_next": "i8",
        "history_count": "i8",
    }
    GROUP_FIELDS: ClassVar[dict[str, str]] = {
        "g_id": "u8",
        "g_enq": "i8",
        "g_comp": "i8",
        "g_since": "f8",
        "g_op": "u8",
    }
    PACE_FIELDS: ClassVar[dict[str, str]] = dict.fromkeys(("pace_n", "pace_k", "pace_q", "pace_w", "pace_w2"), "f8")
    """The running sums of each rank's pace, one per window of :data:`PACE_REPORTS`."""
    CHANNEL_FIELDS: ClassVar[dict[str, str]] = {
        "c_group": "u8",
        "c_peer": "i8",
        "c_dir": "i8",
        "c_posted": "i8",
        "c_completed": "i8",
        "c_blocked": "i8",
        "c_blocked_since": "f8",
    }

    present: Array
    received: Array
    least_delay: Array
    """The least a rank's reports have lately taken from its clock to the monitor's (skew and
    transport): a report that took much longer was held up on the way."""
    first_seen: Array
    t: Array
    n: Array
    interval: Array
    flags: Array
    consequence: Array
    """The monitor's verdict on the rank's exception: whether a peer or a DataLoader worker went
    away first (:mod:`distmon.monitor.state.consequences`); 0 until judged."""
    pid: Array
    host: Array
    local_rank: Array
    steps: Array
    forwards: Array
    stalled_since: Array
    last_step_t: Array
    data_wait: Array
    step_p50: Array
    rss: Array
    gpu_used: Array
    gpu_reserved: Array
    gpu_allocated: Array
    gpu_total: Array
    stack: Array
    bytes: Array
    """Bytes of the report kept, as received."""
    report_t: Array
    """The time (on the rank's clock) of the report kept; NaN: none came yet. Through a relay,
    a rank's whole report comes only when it has news (:mod:`distmon.monitor.state.reports`)."""
    seq: Array
    """Frames taken in before this rank's latest, over the job: which frame it was."""
    via: Array
    data_wait_share: Array
    """A running share of the time the rank waited for DataLoader batches."""
    paced: Array
    """The samples of its pace its latest report counts (:class:`~distmon.wire.Pace`; NaN:
    none, a rank that predates them) ..."""
    waited: Array
    """... and of them those that found it waiting in a collective."""
    pace_n: Array
    """Per window of :data:`PACE_REPORTS`: its samples since, each report's weighed
    :func:`decay` times the next's ..."""
    pace_k: Array
    """... those waiting ..."""
    pace_q: Array
    """... each report's samples times its share waiting squared ..."""
    pace_w: Array
    """... the reports, weighed so, and the sum of their weights squared: how many count
    (:func:`distmon.monitor.state.pace.wait_shares`)."""
    pace_w2: Array
    groups: Array
    channels: Array
    in_collective: Array
    """A collective issued and not completed, in any group."""
    collective_since: Array
    """When the oldest of those with a known start began, on the rank's clock; NaN: none."""
    collective_slot: Array
    """Its group slot, where ``collective_since`` is not NaN."""
    in_p2p: Array
    """Blocked in a send or receive, on any channel."""
    wait_began: Array
    """When the latest wait the rank came out of began (its oldest collective in flight, or a
    send or receive it was blocked in), on its own clock; NaN: none yet ..."""
    wait_ended: Array
    """... and the time of the last report that showed it: how long it had lasted then, at least,
    and when it ended, at the earliest (a short wait a report caught lasted a moment; a rank that
    fell asleep after one came out of it long before the next report)."""
    history_next: Array
    history_count: Array
    g_id: Array
    g_enq: Array
    g_comp: Array
    g_since: Array
    g_op: Array
    c_group: Array
    c_peer: Array
    c_dir: Array
    c_posted: Array
    c_completed: Array
    c_blocked: Array
    c_blocked_since: Array

    def __init__(self, capacity: int = 0) -> None:
        self.capacity = capacity
        for name, dtype in self.SCALARS.items():
            setattr(self, name, blank((capacity,), dtype))
        for name, dtype in self.GROUP_FIELDS.items():
            setattr(self, name, blank((capacity, SLOTS), dtype))
        for name, dtype in self.CHANNEL_FIELDS.items():
            setattr(self, name, blank((capacity, SLOTS), dtype))
        for name, dtype in self.PACE_FIELDS.items():
            setattr(self, name, blank((capacity, len(PACE_REPORTS)), dtype))
        self.history = {m: np.empty((HISTORY, capacity), dtype) for m, dtype in METRICS.items()}
        """Per metric, a ring of samples per rank: ``history[m][k, rank]``, the samples of
        every rank side by side and only the first ``history_count`` of a rank's valid. Left
        unwritten until a sample comes, the memory of a job of 131,072 ranks is taken up a
        second's samples at a time, not all at once."""
        zero_running(self, slice(None))

    def reserve(self, capacity: int) -> None:
        """Room for ranks up to ``capacity`` - 1, doubling as needed."""
        if capacity <= self.capacity:
            return
        new = max(capacity, 2 * self.capacity, 64)
        sampled = bool(self.history_count.any())
        for name in self.everything:
            old = getattr(self, name)
            grown = blank((new, *old.shape[1:]), old.dtype)
            grown[: self.capacity] = old
            setattr(self, name, grown)
        zero_running(self, slice(self.capacity, None))
        for metric, old in self.history.items():
            grown = np.empty((HISTORY, new), old.dtype)
            if sampled:  # else untouched: the rings are taken up as samples come
                grown[:, : self.capacity] = old
            self.history[metric] = grown
        self.capacity = new

    @property
    def everything(self) -> tuple[str, ...]:
        """Every column's name."""
        return (*self.SCALARS, *self.GROUP_FIELDS, *self.CHANNEL_FIELDS, *self.PACE_FIELDS)

    @property
    def group_slots(self) -> int:
        """Group slots a rank: the most group rows any rank has reported, rounded up to a step."""
        return int(self.g_id.shape[1])

    @property
    def channel_slots(self) -> int:
        """Channel slots a rank: the most channel rows any rank has reported, rounded up to a step."""
        return int(self.c_group.shape[1])

    def widen(self, groups: int, channels: int) -> None:
        """Room for ``groups`` group rows and ``channels`` channel rows a rank: the slots of
        every rank grow, in steps of :data:`SLOTS`, so a job pays for its widest rank only."""
        if groups > self.group_slots:
            self._widen(self.GROUP_FIELDS, groups)
        if channels > self.channel_slots:
            self._widen(self.CHANNEL_FIELDS, channels)

    def _widen(self, fields: dict[str, str], rows: int) -> None:
        width = -(-rows // SLOTS) * SLOTS
        for name in fields:
            old = getattr(self, name)
            grown = blank((self.capacity, width), old.dtype)
            grown[:, : old.shape[1]] = old
            setattr(self, name, grown)

    def forget(self, ranks: I8) -> None:
        """Start ``ranks`` afresh: a new process of theirs starts a new history (none of the
        samples before count)."""
        for name in self.everything:
            array = getattr(self, name)
            array[ranks] = blank(array[ranks].shape, array.dtype)
        zero_running(self, ranks)


RUNNING = ("data_wait_share", *Columns.PACE_FIELDS)
"""The columns taken in report by report, which start at zero."""


def blank(shape: tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
    """NaN (absent) for floats, zero otherwise; the :data:`RUNNING` sums start at zero instead."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    return np.zeros(shape, dtype=dt)


def zero_running(cols: Columns, ranks: I8 | slice) -> None:
    for name in RUNNING:
        getattr(cols, name)[ranks] = 0.0


class History:
    """One rank's rings of samples, one per metric, NaN where a value was absent."""

    __slots__ = ("_cols", "_rank")

    def __init__(self, cols: Columns, rank: int) -> None:
        self._cols, self._rank = cols, rank

    @property
    def count(self) -> int:
        return int(self._cols.history_count[self._rank])

    def latest(self, metric: str, ago: int = 0) -> float:
        """The value ``ago`` samples before the newest; NaN if there is none."""
        if ago >= min(self.count, HISTORY):
            return float("nan")
        i = (int(self._cols.history_next[self._rank]) - 1 - ago) % HISTORY
        return float(self._cols.history[metric][i, self._rank])

    def series(self, metric: str, last: int | None = None) -> list[float]:
        """Oldest first; at most ``last`` samples."""
        n = min(self.count, HISTORY, last or HISTORY)
        start = (int(self._cols.history_next[self._rank]) - n) % HISTORY
        ring = self._cols.history[metric][:, self._rank]
        return [float(ring[(start + k) % HISTORY]) for k in range(n)]


def gpu_held(allocated: npt.NDArray[Any], used: npt.NDArray[Any]) -> F8:
    """GPU memory held by live tensors: torch's allocator's count, else NVML's where torch's
    is unknown (NaN), as in a report (:func:`distmon.monitor.state.ranks.report_gpu_allocated`):
    what grows when a rank leaks."""
    held: F8 = np.where(np.isnan(allocated), used, allocated)
    return held
