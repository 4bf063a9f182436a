"""The facts about ranks read off the columns, each defined once, as a function of the columns
over some ranks: the job reads them over all its ranks
(:class:`~distmon.monitor.state.job.JobState`), a rank's view over its own row
(:class:`~distmon.monitor.state.ranks.RankState`), so a rank and the job never disagree.
Whether a rank is silent is judged by the thresholds the monitor runs with, handed in."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state.columns import ALL, F8, I8, Columns, gpu_held
from distmon.monitor.state.consequences import LOST_PEER, LOST_WORKER
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.statuses import EXITED, FAILED, OK, SEVERITY, SILENT, STALLED, STOPPED, WORKER

Ranks = I8 | slice
"""Some ranks: an array of them, or a slice of the columns (all of them by default)."""
Mask = npt.NDArray[np.bool_]


def flagged(cols: Columns, flag: int, ranks: Ranks = ALL) -> Mask:
    """Per rank: heard from, and its latest report's header carries ``flag``."""
    mask: Mask = cols.present[ranks] & ((cols.flags[ranks] & flag) != 0)
    return mask


def found(cols: Columns, ranks: Ranks = ALL) -> Mask:
    """Per rank: heard from, and its latest report its node's eye's, for a rank found from
    outside (:func:`distmon.wire.found_in_flags`: bit 128 without an exception)."""
    mask: Mask = cols.present[ranks] & wire.found_in_flags(cols.flags[ranks])
    return mask


def consequences(cols: Columns, of: int, ranks: Ranks = ALL) -> Mask:
    """Per rank: heard from, and its exception judged a consequence of ``of``
    (:data:`~distmon.monitor.state.consequences.LOST_PEER`, ``LOST_WORKER``, or both) as its
    report came in."""
    mask: Mask = cols.present[ranks] & ((cols.consequence[ranks] & of) != 0)
    return mask


def silent(cols: Columns, limits: Thresholds, now: float, ranks: Ranks = ALL) -> Mask:
    """Per rank: heard from, not exited, and silent longer than its reports allow."""
    after = limits.silent_after(cols.interval[ranks])
    exited = flagged(cols, wire.FLAG_EXITED, ranks)
    mask: Mask = cols.present[ranks] & ~exited & (now - cols.received[ranks] >= after)
    return mask


def failed_on_their_own(cols: Columns, ranks: Ranks = ALL) -> Mask:
    """Per rank: raised, and not only because the job was being stopped around it (a rank
    ended by a signal whose peers or DataLoader workers went in the same teardown did not
    fail)."""
    teardown = flagged(cols, wire.FLAG_STOPPED_BY_SIGNAL, ranks) & consequences(cols, LOST_PEER | LOST_WORKER, ranks)
    mask: Mask = flagged(cols, wire.FLAG_RAISED, ranks) & ~teardown
    return mask


def severities(cols: Columns, limits: Thresholds, now: float, ranks: I8) -> I8:
    """Each of ``ranks``' status, as its severity (an index into
    :data:`~distmon.monitor.state.statuses.STATUSES`), read off the header flags: the rank
    table sorts and filters 131,072 ranks by it. A rank that raised fails only on its own
    (:func:`failed_on_their_own`); one ended by a signal around it is stopped."""
    flags = cols.flags[ranks]
    severity = np.full(len(ranks), SEVERITY[OK])
    severity[(flags & wire.FLAG_WORKER_DEAD) != 0] = SEVERITY[WORKER]
    severity[(flags & wire.FLAG_STALLED) != 0] = SEVERITY[STALLED]
    severity[silent(cols, limits, now, ranks)] = SEVERITY[SILENT]
    signalled = np.where((flags & wire.FLAG_STOPPED_BY_SIGNAL) != 0, SEVERITY[STOPPED], SEVERITY[EXITED])
    severity = np.where((flags & wire.FLAG_EXITED) != 0, signalled, severity)
    severity[failed_on_their_own(cols, ranks)] = SEVERITY[FAILED]
    return severity


def gpu_used(cols: Columns, ranks: Ranks = ALL) -> F8:
    """Per rank: NVML's used memory, else what torch's allocator reserved (NaN: no GPU)."""
    nvml = cols.gpu_used[ranks]
    used: F8 = np.where(np.isnan(nvml), cols.gpu_reserved[ranks], nvml)
    return used


def gpu_allocated(cols: Columns, ranks: Ranks = ALL) -> F8:
    """Per rank: memory held by live tensors (torch's allocator, else NVML's count)."""
    return gpu_held(cols.gpu_allocated[ranks], cols.gpu_used[ranks])


def gpu_total(total: Any) -> Any:
    """A GPU's memory as reported, an array or one value; NaN for none (a report of 0 is none)."""
    return np.where(total == 0, np.nan, total)
