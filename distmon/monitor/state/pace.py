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

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.state.arrays import distinct
from distmon.monitor.state.columns import ALL, F8, I8, PACE_REPORTS, Columns

MIN_REPORTS = 10.0
"""Reports a share must come from (as many as weigh, :data:`DECAY` counted) to be judged."""
MEDIAN_ERROR = math.sqrt(math.pi / 2)
"""The standard error of a median of k values is this times theirs over the root of k."""


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


def waits(cols: Columns, ranks: I8, window: int) -> tuple[F8, F8, F8]:
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
    now, *longer = [_holdups(cols, judged, window) for window in range(len(PACE_REPORTS))]
    sure = np.fmax.reduce([now.sure, *(h.sure for h in longer)])
    return dataclasses.replace(now, sure=sure)


def _holdups(cols: Columns, judged: np.ndarray, window: int) -> Holdups:
    size = cols.capacity
    blank = np.full(size, np.nan)
    found = Holdups(blank, blank.copy(), blank.copy(), blank.copy(), blank.copy(), np.full(size, -1))
    share, error, reports = waits(cols, np.arange(size), window)
    ranks = np.flatnonzero(judged & (reports >= MIN_REPORTS) & ~np.isnan(share))
    found.waits[ranks] = share[ranks]
    if len(ranks) < 2:
        return found
    used = np.arange(cols.group_slots) < cols.groups[ranks, None]
    rank, slot = np.nonzero(used)
    rank = ranks[rank]
    gid = cols.g_id[rank, slot]
    present = np.flatnonzero(cols.present)
    pipelines = distinct(cols.c_group[present][np.arange(cols.channel_slots) < cols.channels[present, None]])
    keep = (gid != 0) & ~np.isin(gid, pipelines)
    rank, slot, gid = rank[keep], slot[keep], gid[keep]
    order = np.lexsort((share[rank], gid))
    rank, slot, gid = rank[order], slot[order], gid[order]
    shared = _segments(gid)[1] >= 2  # the whole run of a group with one member judged goes
    rank, slot, gid = rank[shared], slot[shared], gid[shared]
    if not len(rank):
        return found
    starts, members = _segments(gid)
    x = share[rank]
    peers = _medians_of_others(x, np.arange(len(x)) - starts, members)
    peers_error = MEDIAN_ERROR * _segment_medians(error[rank], gid) / np.sqrt(members - 1)
    held_up = peers - x
    sure = held_up / np.sqrt(error[rank] ** 2 + peers_error**2)
    by = np.lexsort((sure, rank))
    last = np.r_[rank[by][1:] != rank[by][:-1], True]
    most, least = by[last], by[np.r_[True, last[:-1]]]
    who = rank[most]
    found.peers[who], found.share[who], found.sure[who] = peers[most], held_up[most], sure[most]
    found.held[who], found.slot[who] = sure[least], slot[most]
    return found


def _segments(keys: np.ndarray) -> tuple[I8, I8]:
    """For sorted ``keys``: each element's run of equal keys, as where it starts and its length."""
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    lengths = np.diff(np.r_[first, len(keys)])
    run = np.repeat(np.arange(len(first)), lengths)
    starts: I8 = first[run]
    members: I8 = lengths[run]
    return starts, members


def _medians_of_others(values: F8, position: I8, members: I8) -> F8:
    """For values sorted within runs (``position`` in a run of ``members``, two or more):
    each one's median of the others of its run, read off by index, itself skipped."""
    start = np.arange(len(values)) - position
    others = members - 1
    middle = others // 2

    def rest(j: I8) -> F8:
        chosen: F8 = values[np.clip(start + np.where(j < position, j, j + 1), 0, len(values) - 1)]
        return chosen

    medians: F8 = np.where(others % 2 == 1, rest(middle), (rest(middle - 1) + rest(middle)) / 2)
    return medians


def _segment_medians(values: F8, keys: np.ndarray) -> F8:
    """For each element, the median of ``values`` over its run of equal ``keys`` (sorted)."""
    order = np.lexsort((values, keys))
    ordered = values[order]
    starts, members = _segments(keys[order])
    low, high = ordered[starts + (members - 1) // 2], ordered[starts + members // 2]
    medians = np.empty(len(values))
    medians[order] = (low + high) / 2
    return medians


def stepping(cols: Columns) -> np.ndarray:
    """The ranks whose pace is judged: heard from and not stalled (an exited rank's stands as
    it was at its end: what a post-mortem reads)."""
    mask: np.ndarray = cols.present & ((cols.flags & wire.FLAG_STALLED) == 0)
    return mask
