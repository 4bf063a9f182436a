"""Who holds up whom at the job's pace: each rank's share of time waiting in collectives, from
its own samples (:class:`~distmon.wire.Pace`), against its peers'.

In a synchronous job every rank steps at the slowest one's pace, so the step times are all
the same; what differs is who waits. Every member of a collective finishes it together, so
the share of its time a rank waits in a group's collectives less its peers' is how much
later it comes to them: a rank that comes late to every collective holds the others up by
the difference, and the job, but for it, would step that much faster.

The shares are the ranks' own, a report's samples against the last, weighed down report by
report over two windows (:data:`~distmon.monitor.state.columns.PACE_REPORTS`): over the last
half minute or so, a rank that turns slow is seen within it, and one that recovers is
forgiven as soon; over the last minutes, a slowdown too small to be sure of in half a minute
is, later. How sure a hold-up is grows with the samples: it is set against its standard
error, read off how much the rank's share varied from report to report (however the job's own
rhythm, a loaded host or the sampling made it vary), never less than sampling alone makes
it. A rank's hold-up is as it is now, over the short window, and as sure as the surer window
makes it.

A rank is compared with its peers in each of its groups of collectives, never across a
pipeline (a group carrying sends and receives joins stages that do different work):

- ``share``: the most it holds up the members of one of its groups, as a share of their
  time (the others' median wait less its own), where that is surest; ``peers`` their wait;
- ``sure``: that hold-up over its standard error;
- ``held``: the least such over its groups, very negative for a rank its peers in some group
  hold up: a rank waiting for a straggler in its tensor-parallel group comes late to its
  data-parallel peers in turn, holding them up for another's sake.

:mod:`distmon.monitor.rules.pace` judges them; the screens show ``share`` per rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import ALL, F8, I8, PACE_REPORTS, Columns

MIN_REPORTS = 10.0
"""Reports a share must come from (as many as weigh, :data:`DECAY` counted) to be judged."""
MEDIAN_ERROR = math.sqrt(math.pi / 2)
"""The standard error of a median of k values is this times theirs over the root of k."""
EVERY = 1.0
"""Seconds of the monitor's clock between two workings out of the hold-ups, as reports come
(:meth:`distmon.monitor.state.ingest.Admission.take_in`) ..."""
EVERY_AT_SCALE = (16_384, 5.0)
"""... and beyond this many ranks, these: a working out grows with the ranks, and a large job's
stragglers are named over minutes, not seconds."""


def due(last: float, now: float, ranks: int) -> bool:
    """Whether the hold-ups worked out at ``last`` are due again at ``now``, among ``ranks``."""
    many, every = EVERY_AT_SCALE
    return now - last >= (every if ranks > many else EVERY)


@dataclass(frozen=True)
class Holdups:
    """Per rank (indexed by rank, NaN where not judged: too few samples, stalled, exited, or no
    peers in a group of collectives), as the module says."""

    waits: F8
    """Its share of time waiting in collectives."""
    peers: F8
    """Its peers' in the group it holds up most surely."""
    share: F8
    sure: F8
    held: F8
    slot: I8
    """The group slot of that group (-1: none)."""

    def holding(self, sure: float, ranks: I8 | slice = ALL) -> F8:
        """Per rank, the share of its peers' time it holds them up where that is ``sure``
        standard errors sure or more, 0 where it is not; NaN where it has no peers judged."""
        share = self.share[ranks]
        unsure = np.where(np.isnan(share), np.nan, 0.0)
        with np.errstate(invalid="ignore"):
            held: F8 = np.where(self.sure[ranks] >= sure, np.maximum(share, 0.0), unsure)
        return held

    def of(self, rank: int, sure: float) -> RankPace | None:
        """One rank's, a hold-up counting where it is ``sure`` standard errors sure or more;
        None where its pace is not known yet."""
        if rank >= len(self.waits) or math.isnan(self.waits[rank]):
            return None
        if math.isnan(self.share[rank]):
            return RankPace(float(self.waits[rank]), None, None)
        held = float(self.holding(sure, slice(rank, rank + 1))[0])
        return RankPace(float(self.waits[rank]), float(self.peers[rank]), held)


@dataclass(frozen=True)
class RankPace:
    """One rank's pace, as :class:`Holdups` says it."""

    waits: float
    """The share of its time it waits in collectives."""
    peers: float | None
    """Its peers', in the group it holds up most; None where it has none judged."""
    holds: float | None
    """The share of their time it holds them up, where that is sure; 0 where it is not."""


def wait_shares(cols: Columns, ranks: I8, window: int) -> tuple[F8, F8, F8]:
    """Each rank's share of time waiting in collectives over ``window`` (an index into
    :data:`~distmon.monitor.state.columns.PACE_REPORTS`), its standard error, and the reports
    it comes from (as many as weigh)."""
    n, k = cols.pace_n[ranks, window], cols.pace_k[ranks, window]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = k / n
        spread = np.maximum(cols.pace_q[ranks, window] / n - share**2, 0.0)
        reports = cols.pace_w[ranks, window] ** 2 / cols.pace_w2[ranks, window]
        smoothed = (k + 1) / (n + 2)  # sampling's own error, never zero, if it never waited
        error = np.sqrt(np.maximum(spread / reports, smoothed * (1 - smoothed) / n))
    return share, error, reports


def holdups(cols: Columns, judged: np.ndarray) -> Holdups:
    """The hold-ups of the ranks ``judged`` (a mask over the columns: :func:`stepping`),
    compared with their peers in each group of collectives: as they are now (over the shortest
    window), as sure as the surest window makes them."""
    size = cols.capacity
    share, _, reports = wait_shares(cols, np.arange(size), 0)
    ranks = np.flatnonzero(judged & (reports >= MIN_REPORTS) & ~np.isnan(share))
    blank = np.full(size, np.nan)
    found = Holdups(blank, blank.copy(), blank.copy(), blank.copy(), blank.copy(), np.full(size, -1))
    found.waits[ranks] = share[ranks]
    pairs = _pairs(cols, ranks)
    if pairs is None:
        return found
    now, *longer = [_compared(cols, pairs, window) for window in range(len(PACE_REPORTS))]
    rank, slot, *_ = pairs
    starts = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    who = rank[starts]
    surest = np.fmax.reduce([now[2], *(sure for _, _, sure in longer)])
    most = _first_of_most(now[2], starts)
    found.peers[who], found.share[who], found.slot[who] = now[0][most], now[1][most], slot[most]
    found.sure[who] = np.maximum.reduceat(surest, starts)
    found.held[who] = np.minimum.reduceat(now[2], starts)
    return found


Pairs = tuple[I8, I8, I8, I8, I8]
"""Each rank judged and each of its groups of collectives with another member judged, rank by
rank: the rank, the group's slot in its row, the group (numbered 0 on), its members judged,
and where its members begin among all pairs sorted by group."""


def _pairs(cols: Columns, ranks: I8) -> Pairs | None:
    """The ranks' groups to be compared in: a group carrying sends and receives (a pipeline's)
    joins stages that do different work, and a group with one member judged has nobody to
    compare with."""
    used = np.arange(cols.group_slots) < cols.groups[ranks, None]
    rank, slot = np.nonzero(used)
    rank = ranks[rank]
    gid = cols.g_id[rank, slot]
    present = np.flatnonzero(cols.present)
    pipelines = distinct(cols.c_group[present][np.arange(cols.channel_slots) < cols.channels[present, None]])
    keep = (gid != 0) & ~np.isin(gid, pipelines)
    _, group = np.unique(gid[keep], return_inverse=True)
    shared = np.bincount(group)[group] >= 2
    rank, slot, group = rank[keep][shared], slot[keep][shared], group[shared]
    if not len(rank):
        return None
    members = np.bincount(group)
    begins = np.cumsum(members) - members
    return rank, slot, group, members[group], begins[group]


def _compared(cols: Columns, pairs: Pairs, window: int) -> tuple[F8, F8, F8]:
    """For each pair over ``window``: the median of the others' shares in the group, how much
    more it is than the rank's own, and how sure that is (in standard errors)."""
    rank, _, group, members, begins = pairs
    share, error, _ = wait_shares(cols, rank, window)
    peers = _medians_of_others(share, group, members, begins)
    peers_error = MEDIAN_ERROR * _medians_of_others(error, group, members, begins) / np.sqrt(members - 1)
    held_up = peers - share
    sure: F8 = held_up / np.sqrt(error**2 + peers_error**2)
    return peers, held_up, sure


def _medians_of_others(values: F8, group: I8, members: I8, begins: I8) -> F8:
    """For each value, the median of the others of its group (numbered 0 on, two or more
    members each, which begin at ``begins`` sorted by group): the values sorted within groups
    in one sort (a value is in [0, 1), so the group number plus it sorts by both), each one's
    median read off by index, itself skipped."""
    order = np.argsort(group + np.minimum(values, np.nextafter(1.0, 0.0)))
    ordered = values[order]
    position = np.empty(len(values), dtype=np.int64)
    position[order] = np.arange(len(values))
    within = position - begins
    others = members - 1
    middle = others // 2

    def rest(j: I8) -> F8:
        chosen: F8 = ordered[np.clip(begins + np.where(j < within, j, j + 1), 0, len(values) - 1)]
        return chosen

    medians: F8 = np.where(others % 2 == 1, rest(middle), (rest(middle - 1) + rest(middle)) / 2)
    return medians


def _first_of_most(values: F8, starts: I8) -> I8:
    """For runs beginning at ``starts``: the index of each run's largest value (its first)."""
    lengths = np.diff(np.r_[starts, len(values)])
    best = np.repeat(np.maximum.reduceat(values, starts), lengths)
    hits = np.flatnonzero(values == best)
    run = np.searchsorted(starts, hits, side="right") - 1
    first = np.r_[True, run[1:] != run[:-1]]
    chosen: I8 = hits[first]
    return chosen


def stepping(cols: Columns) -> np.ndarray:
    """The ranks whose pace is judged: heard from and not stalled (an exited rank's stands as
    it was at its end: what a post-mortem reads)."""
    mask: np.ndarray = cols.present & ((cols.flags & wire.FLAG_STALLED) == 0)
    return mask
