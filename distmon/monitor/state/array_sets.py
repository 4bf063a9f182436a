"""Sets the monitor holds as arrays over every rank (the distinct values of one, the ranks a
group names, the ranks a mask holds), where numpy's own is slow at scale."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T", bound=np.generic)


def distinct(values: npt.NDArray[T]) -> npt.NDArray[T]:
    """The sorted distinct values, as ``np.unique`` gives them. numpy 2's ``np.unique`` hashes
    when asked for the values alone, slower than this sort over a job's host hashes
    (benchmarks/bench_detector.py measures the tick that calls this)."""
    ordered: npt.NDArray[T] = np.sort(values, axis=None)
    if len(ordered) < 2:
        return ordered
    keep: npt.NDArray[Any] = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    chosen: npt.NDArray[T] = ordered[keep]
    return chosen


def expand(runs: list[list[int]]) -> npt.NDArray[np.int64]:
    """The ranks a group's ``(start, count, stride)`` runs name, in order."""
    parts = [start + np.arange(count, dtype=np.int64) * stride for start, count, stride in runs]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def within(mask: npt.NDArray[np.bool_], ranks: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``mask[ranks]``, False for ranks beyond it (ranks the columns have no room for yet)."""
    inside = ranks < len(mask)
    chosen: npt.NDArray[np.bool_] = np.zeros(len(ranks), dtype=bool)
    chosen[inside] = mask[ranks[inside]]
    return chosen
