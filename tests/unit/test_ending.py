"""How a job ended is decided once (:mod:`distmon.monitor.state.ending`): the alerts, the report's
"Ended:" line and its table of ranks agree, and the ranks torn down after a failure are
never named as its cause, whichever of them raised first."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from distmon import wire
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import LooksRecord, MessageRecord, Record
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import CRITICAL, WARNING
from distmon.monitor.state.ending import Ending, fates, first_cause, rank_ending
from distmon.monitor.state.words import time_of_day
from distmon.node import looks as eye_looks
from distmon.node.looks import Looks
from distmon.node.proc import Sample
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
    known = fates(monitor.state, alerts, sim.start + 25)
    words = {r: rank_ending(s, sim.start + 25, known) for r, s in monitor.state.ranks.items()}
    assert words[2].startswith("its process is gone")
    assert all(words[r].endswith("(after losing a peer)") for r in (0, 1, 3)), words


KILLED = 10.6
"""Rank 2's last report came at 10.5 s (its phase of the second): silent 1.5 s after it, at
12 s, is when the others' lost connection alone names it."""


def watched(
    until: float,
    ends: dict[int, float],
    words_at: dict[int, float] | None = None,
    eye: bool = True,
    stopped: bool = False,
) -> tuple[SimJob, Monitor, list[tuple[float, str, list[int]]]]:
    """Rank 2 SIGKILLed at :data:`KILLED` on the monitor's own host, whose eye watches the
    ranks there and tells each end listed (``ends``: rank to when it told; without ``eye``,
    none), through the one loop up to ``until`` (``stopped``: then the session's closing tick, as
    a recorder stopped there runs it); ``words_at`` moves a rank's last words.
    Returns each alert raised as it was raised: the second, its kind and ranks."""
    sim = SimJob(world=4).kill(2, at=KILLED)
    records: list[Record] = [LooksRecord(sim.start, eye_looks.encode_looks([Looks("node000")]))] if eye else []
    for t, raw in sim.stream(until=until):
        report = wire.decode(raw)
        moved = report.exception is not None and words_at is not None and report.rank in words_at
        records.append(MessageRecord(sim.start + words_at[report.rank] if moved else t, raw))  # type: ignore[index]
    for rank, t in ends.items():
        looks = eye_looks.encode_looks([Looks("node000", [Sample(10_000 + rank, 500.0 + t, "X")])])
        records.append(LooksRecord(sim.start + t, looks))
    records.sort(key=lambda r: r.t)
    monitor = Monitor(Detector())
    raised: list[tuple[float, str, list[int]]] = []

    def tick(now: float) -> None:
        raised.extend((now - sim.start, a.kind, list(a.ranks)) for a in monitor.alerts.history if a.t == now)

    session = Session(ReplayFeed(records, speed=math.inf, end=sim.start + until), monitor, on_tick=tick)
    session.drain()
    if stopped:
        session.finish()
    return sim, monitor, raised


def test_a_rank_its_eye_saw_end_without_a_word_is_lost_at_the_next_tick_in_the_eyes_words() -> None:
    """Its eye tells rank 2 gone a quarter second after the kill: named at the next tick (11 s),
    not once its silence tells (12 s); the words say which eye saw it."""
    sim, monitor, raised = watched(until=13, ends={2: KILLED + 0.25})
    assert raised == [(11.0, "rank_lost", [2])], raised
    seen = f"as the monitor's own eye (the monitor runs on node000) saw at {time_of_day(sim.start + KILLED + 0.25)}"
    assert f"its process gone, {seen}" in monitor.alerts.history[0].detail, monitor.alerts.history[0].detail
    _, _, unseen = watched(until=13, ends={}, eye=False)
    assert unseen == [(12.0, "rank_lost", [2])], unseen


def test_a_rank_seen_gone_a_moment_before_its_last_words_come_is_not_lost() -> None:
    """Rank 0's eye tells its end at 10.95 s, its last words come at 11.05 s (on their way when
    it ended): the tick at 11 s waits for them."""
    _, _, raised = watched(until=13, ends={2: KILLED + 0.25, 0: 10.95}, words_at={0: 11.05})
    assert raised == [(11.0, "rank_lost", [2])], raised


def test_a_recording_stopped_before_the_rank_was_named_ends_it_as_its_eye_saw_it() -> None:
    sim, monitor, raised = watched(until=10.95, ends={2: KILLED + 0.25})
    assert not raised
    end = sim.start + 10.95
    words = rank_ending(monitor.state.ranks[2], end, fates(monitor.state, monitor.alerts.history, end))
    assert words.startswith("its process is gone, without last words, as the monitor's own eye"), words


def test_a_recorder_stopped_as_the_eye_tells_an_end_names_the_rank_lost_at_its_closing_tick() -> None:
    """The job ended and the recorder was stopped at 10.96 s; rank 2's eye told its end at 10.95 s,
    too late for the tick at 11 s to call its silence final: the closing tick runs once more and
    names it (CI's ci193, a loaded host: the recorder said nothing of the fault)."""
    _, monitor, raised = watched(until=10.96, ends={2: 10.95}, stopped=True)
    assert raised == [(12.0, "rank_lost", [2])], raised
    ending = monitor.state.ending(a for a in monitor.alerts.history if a.resolved is None)
    assert ending is not None and ending.words.startswith("failed: rank_lost: rank 2 "), ending


def test_before_any_rule_has_spoken_the_ranks_that_lost_a_peer_are_not_the_cause() -> None:
    _, monitor = killed(until=10.5)
    assert not monitor.alerts.history
    ending = monitor.state.ending([])
    assert ending is not None and ending.state == Ending.FAILED
    assert ending.words == "failed: ranks 0-1, 3 raised on losing a peer, which went without a word"


def test_a_hang_that_runs_into_the_collective_timeout_stays_the_one_alert_and_the_cause() -> None:
    """Rank 0 stuck (still reporting, in its own code); at 41 s the others' collective times
    out (gloo's words), then the launcher stops rank 0. The hang stays one critical alert,
    naming rank 0 and what the others then raised; nobody is 'a peer that did not report'."""
    sim = SimJob(world=4).pause(0, at=10, every=1000, seconds=2, stuck=0)
    monitor = Monitor(Detector())
    drive(sim, monitor, until=40)
    t = sim.start + 41
    timeout = "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 120000ms for recv operation to complete"
    for rank in (1, 2, 3):
        exc = wire.ExceptionInfo("RuntimeError", timeout, where=None, traceback=[], t=t)
        monitor.ingest(wire.encode(replace(sim.report(rank, t), exception=exc, exit=wire.ExitInfo("exception", t))), t)
    monitor.ingest(wire.encode(sim.report(0, t)), t)
    monitor.tick(t + 0.9)
    end = replace(sim.report(0, t + 1), exit=wire.ExitInfo("terminated", t + 1))
    monitor.ingest(wire.encode(end), t + 1)
    for k in range(2, 8):
        monitor.tick(t + k)
    alerts = monitor.alerts.history
    assert [(a.kind, a.ranks, a.severity, a.resolved) for a in alerts] == [("hang", [0], "critical", None)], alerts
    assert alerts[0].summary.startswith("rank 0 stood still 31s, until ranks 1-3 gave up waiting for it (RuntimeError")
    assert "train.py:21 in upload_metrics" in alerts[0].detail and "consequences" in alerts[0].detail, alerts[0].detail
    ending = monitor.state.ending(alerts)
    assert ending is not None and ending.state == Ending.FAILED
    assert ending.words.startswith("failed: hang: rank 0 stood still"), ending.words


@dataclass(frozen=True)
class Said:
    """An alert as :func:`first_cause` reads it."""

    kind: str
    severity: str = CRITICAL
    ranks: list[int] = field(default_factory=lambda: [1])


def test_the_first_cause_is_a_failure_before_a_stop_a_critical_before_a_warning_then_the_earliest() -> None:
    hang, lost, crash = Said("hang", ranks=[2]), Said("rank_lost", ranks=[3]), Said("worker_crash", ranks=[0])
    assert first_cause([hang, lost, crash]) is lost, "a failure before a stop; of failures, the earliest"
    warned = Said("rank_exception", WARNING)
    assert first_cause([warned, hang]) is hang, "a critical before a warning"
    nobody = Said("hang", ranks=[])
    assert first_cause([nobody, hang]) is hang, "one that names ranks before one that names none"
    assert first_cause([nobody]) is nobody


def test_no_other_alert_is_a_first_cause_however_critical() -> None:
    """The live header's rule, which the report, the post-mortem and ``distmon analyze`` now
    share: no fallback to the earliest critical alert, nor to the first alert."""
    others = [Said("gpu_fault"), Said("relay_lost"), Said("straggler", WARNING)]
    assert first_cause(others) is None
    stall = Said("stall", WARNING)
    assert first_cause([*others, stall]) is stall, "a warning of the kinds that end a job still is one"
