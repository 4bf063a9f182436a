"""The detection rules, one module per family. Each is ``rule(job, context) -> findings``."""

from __future__ import annotations

from distmon.monitor.rules.base import Rule
from distmon.monitor.rules.failures import rank_exception, rank_lost
from distmon.monitor.rules.groups import hang_and_divergence
from distmon.monitor.rules.memory import gpu_fault, memory_pressure
from distmon.monitor.rules.pace import straggler
from distmon.monitor.rules.workers import worker_crash

RULES: list[Rule] = [
    rank_exception,
    rank_lost,
    worker_crash,
    hang_and_divergence,
    straggler,
    memory_pressure,
    gpu_fault,
]

__all__ = ["RULES", "Rule"]
