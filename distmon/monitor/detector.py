"""The detector: a pure function of the job's state and the time, returning findings."""

from __future__ import annotations

from collections.abc import Callable

from distmon.monitor.alerts import Finding
from distmon.monitor.state import JobState

Probe = Callable[[str, int], "str | None"]


class Detector:
    def __init__(self, probe: Probe | None = None) -> None:
        self.probe = probe

    def evaluate(self, state: JobState, now: float) -> list[Finding]:
        return []
