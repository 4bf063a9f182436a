"""Seconds the monitor did not watch, counted apart from the messages it dropped.

Its loop stood still (its process stopped, a swapping login node) or its clock jumped (a
suspended VM resumed): it saw nothing of the seconds in between, and names no rank for their
silence (:mod:`distmon.monitor.rules.keeping_up`). :attr:`JobState.unwatched` counts them in
seconds, by why, beside :attr:`JobState.dropped`, which counts messages. A recording's ``d``
record and a tick told to attached screens carry both in one map, as they always have: its
:data:`REASONS` are seconds, every other reason messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

PAUSED = "monitor_paused_s"
"""Seconds the monitor's own loop did not run (its process stopped or starved): the silence of
those seconds is not the job's."""
JUMPED = "clock_jumped_s"
"""Seconds the monitor's clock jumped while its loop ran (a suspended VM resumed, the clock
stepped): seconds it did not watch either."""
REASONS = frozenset((PAUSED, JUMPED))


def apart(counts: Mapping[str, int]) -> tuple[Counter[str], Counter[str]]:
    """The messages dropped and the seconds not watched, by reason, in a map of both."""
    dropped, unwatched = Counter[str](), Counter[str]()
    for why, n in counts.items():
        (unwatched if why in REASONS else dropped)[why] += n
    return dropped, unwatched
