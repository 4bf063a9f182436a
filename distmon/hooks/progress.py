"""Step and forward counting: the only distmon code on the training thread's hot path.

Each hook does a counter increment and a clock read; everything derived from them
(step-time statistics, data-wait share) is computed by the sampler thread.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections import deque
from typing import Any

from distmon.wire import StepStats

STEP_HISTORY = 256


class Counters:
    """Counters written by the training thread and read by the sampler thread.

    No lock: each field has one writer, and the sampler tolerates reading a step count
    one behind its timestamp.
    """

    def __init__(self) -> None:
        self.steps = 0
        self.forwards = 0
        self.data_wait = 0.0
        self.step_ends: deque[float] = deque(maxlen=STEP_HISTORY)
        self.thread: int | None = None
        """The thread that last stepped or ran a forward (its ``threading.get_ident()``): the
        one that trains (:mod:`distmon.hooks.training`)."""

    def on_optimizer_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self.steps += 1
        self.thread = threading.get_ident()
        self.step_ends.append(time.monotonic())

    def step_stats(self) -> StepStats | None:
        ends = list(self.step_ends)
        if len(ends) < 2:
            return None
        gaps = [b - a for a, b in itertools.pairwise(ends)]
        return StepStats(
            n=len(gaps),
            mean=statistics.fmean(gaps),
            p50=statistics.median(gaps),
            max=max(gaps),
            last=gaps[-1],
        )

    def last_step_time(self) -> float | None:
        """The wall-clock time of the last step, from its monotonic stamp."""
        if not self.step_ends:
            return None
        return time.time() - (time.monotonic() - self.step_ends[-1])


def count_forwards(module: Any, progress: Counters) -> None:
    """Count calls of ``module`` by wrapping its bound ``forward`` on the instance.

    A forward pre-hook would cost more: any hook sends ``Module.__call__`` down its slow
    path. The wrapper is removed by :func:`uncount_forwards`.
    """
    if getattr(module.forward, "_distmon_wrapped", False):
        return
    original = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        progress.forwards += 1
        progress.thread = threading.get_ident()
        return original(*args, **kwargs)

    forward._distmon_wrapped = True  # type: ignore[attr-defined]
    module.forward = forward


def uncount_forwards(module: Any) -> None:
    if getattr(module.__dict__.get("forward"), "_distmon_wrapped", False):
        del module.forward
