"""How a job ended is decided once (:mod:`distmon.monitor.state.ending`): the alerts, the report's
"Ended:" line and its table of ranks agree, and the ranks torn down after a failure are
never named as its cause, whichever of them raised first."""

from __future__ import annotations

from distmon.monitor.monitor import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.ending import Ending, gone, rank_ending
from tests.support.simulate import SimJob, drive


def killed(until: float) -> tuple[SimJob, Monitor]:
    """Rank 2 SIGKILLed at 10 s; the others raise on the broken connection at once, before
    any launcher's SIGTERM reaches them."""
    sim = SimJob(world=4).kill(2, at=10)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, until)
    return sim, monitor


def test_a_killed_rank_is_the_failure_in_the_alerts_the_ending_and_the_table() -> None:
    sim, monitor = killed(until=25)
    alerts = monitor.alerts.history
    assert [(a.kind, a.ranks) for a in alerts] == [("rank_lost", [2])]
    ending = monitor.state.ending(a for a in alerts if a.resolved is None)
    assert ending is not None and ending.state == Ending.FAILED
    assert ending.words.startswith("failed: rank_lost: rank 2 ") and "process gone" in ending.words
    words = {r: rank_ending(s, sim.start + 25, gone(alerts)) for r, s in monitor.state.ranks.items()}
    assert words[2].startswith("its process is gone")
    assert all(words[r].endswith("(after losing a peer)") for r in (0, 1, 3)), words


def test_before_any_rule_has_spoken_the_ranks_that_lost_a_peer_are_not_the_cause() -> None:
    _, monitor = killed(until=10.5)
    assert not monitor.alerts.history
    ending = monitor.state.ending([])
    assert ending is not None and ending.state == Ending.FAILED
    assert ending.words == "failed: ranks 0-1, 3 raised on losing a peer, which went without a word"
