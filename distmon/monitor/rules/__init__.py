"""The detection rules, one module per family. Each is ``rule(job, context) -> findings``.
They read the state and what is seen from outside. The monitor's core runs them (its
:class:`~distmon.monitor.rules.detector.Detector`, which analyze's monitor runs too); the session
and the intake read only :mod:`~distmon.monitor.rules.keeping_up`'s names for why the monitor
fell behind.

Failures and stops are judged every tick. Trends (straggling, memory growth, GPU health)
build over tens of seconds, so they are judged every ``SLOW_PERIOD`` seconds and their
findings stand in between, so most ticks do not pay for them (``benchmarks/bench_detector.py``
measures the tick).
"""

from __future__ import annotations

from distmon.monitor.rules.base import Rule
from distmon.monitor.rules.failures import rank_exception, rank_lost
from distmon.monitor.rules.found import found_gone, found_hang
from distmon.monitor.rules.hang import hang_and_divergence
from distmon.monitor.rules.links import link_flapping
from distmon.monitor.rules.memory import gpu_fault, memory_pressure
from distmon.monitor.rules.monitor_behind import monitor_behind
from distmon.monitor.rules.nodes import node_lost
from distmon.monitor.rules.pace import straggler
from distmon.monitor.rules.process import watch_ahead
from distmon.monitor.rules.stalls import stall
from distmon.monitor.rules.workers import worker_crash

SLOW_PERIOD = 5.0

RULES: list[tuple[Rule, float]] = [
    (monitor_behind, 0.0),
    (watch_ahead, 0.0),
    (rank_exception, 0.0),
    (rank_lost, 0.0),
    (found_gone, 0.0),
    (node_lost, 0.0),
    (link_flapping, 0.0),
    (worker_crash, 0.0),
    (hang_and_divergence, 0.0),
    (found_hang, 0.0),
    (stall, 0.0),
    (straggler, SLOW_PERIOD),
    (memory_pressure, SLOW_PERIOD),
    (gpu_fault, SLOW_PERIOD),
]
"""Each rule with the seconds between its evaluations (0: every tick)."""

__all__ = ["RULES", "Rule"]
