"""The lines a batch job's log gets for an alert's life (``distmon record``, ``replay --headless``)."""

from __future__ import annotations

import time

from distmon.export.plain import alert_line
from distmon.monitor.state.alerts import CRITICAL, WARNING, AlertBook, Finding

T0 = 1_800_000_000.0


def hang(severity: str, age: int) -> Finding:
    return Finding("hang", "hang", severity, [2], f"rank 2 holds up the job, for {age}s", f"waiting {age}s")


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def test_a_warning_that_turns_critical_is_logged_as_a_page_and_rewording_is_not() -> None:
    """A culprit still being looked at is a warning; found asleep, the alert is critical: the
    log must say so when it happens, or a batch job's log shows a warning that never paged."""
    book = AlertBook()
    lines = []
    for t, severity in [(0, WARNING), (1, WARNING), (2, CRITICAL), (3, CRITICAL), (4, WARNING)]:
        for change in book.update([hang(severity, t)], now=T0 + t):
            lines.append(alert_line(change, T0 + t))
    for change in book.update([], now=T0 + 5):
        lines.append(alert_line(change, T0 + 5))
    assert lines == [
        f"distmon {clock(T0)} WARNING hang: rank 2 holds up the job, for 0s",
        None,
        f"distmon {clock(T0 + 2)} CRITICAL hang: rank 2 holds up the job, for 2s (a warning since {clock(T0)})",
        None,
        None,
        f"distmon {clock(T0 + 5)} resolved hang: rank 2 holds up the job, for 4s",
    ]


def test_a_change_printed_after_more_ticks_says_what_it_said_at_its_own() -> None:
    """A loop that runs several ticks before it prints (a monitor stopping, a loaded machine)
    prints each change as its tick left the alert, as its record keeps it, not in the words of a
    later tick: the raise of a hang at 0 s is not printed "for 2s"."""
    book = AlertBook()
    changes = [(t, change) for t in range(3) for change in book.update([hang(CRITICAL, t)], now=T0 + t)]
    assert [alert_line(change, T0 + t) for t, change in changes] == [
        f"distmon {clock(T0)} CRITICAL hang: rank 2 holds up the job, for 0s",
        None,
        None,
    ]
    assert changes[0][1].alert.summary == "rank 2 holds up the job, for 2s"  # the alert itself moved on
