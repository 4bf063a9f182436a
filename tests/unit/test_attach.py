"""Screens attached to a live monitor (``distmon watch --attach``), with real sockets: a monitor
fed a simulated job on a clock the test moves, its attach server, and screens in this process or in
processes of their own. What a real ``distmon record`` and a real job show two screens is in
``tests/jobs/test_attach_jobs.py``."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distmon import keys
from distmon.endpoint import EndpointError, viewer_address
from distmon.monitor.attach import serve
from distmon.monitor.attach.feed import AttachedFeed
from distmon.monitor.attach.follow import AttachedMonitor
from distmon.monitor.attach.messages import AttachError, numbered, read, tick_message
from distmon.monitor.attach.serve import AttachServer
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.outside.sight import Seen
from distmon.monitor.overview import OverviewTracker, Story
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import MessageRecord
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import CRITICAL, WARNING, Alert, AlertBook, Finding
from distmon.monitor.state.ending import first_cause
from distmon.node.proc import Sample
from distmon.tui.job_header import headline, story
from distmon.wire import encode
from distmon.wire.sockets import Batch
from tests.support.commands import distmon, free_port
from tests.support.paths import REPO
from tests.support.recorder import recording
from tests.support.simulate import SimJob
from tests.support.waiting import wait_until

CULPRIT = 5


@dataclass
class Live:
    """A monitor of a simulated job, fed on a clock the test moves, as ``distmon record``
    feeds it (the one Session), its screens on an attach server beside ``endpoint``."""

    endpoint: str
    sim: SimJob
    monitor: Monitor
    server: AttachServer
    session: Session
    clock: list[float]
    tracker: OverviewTracker

    def advance(self, seconds: float, step: float = 0.1) -> None:
        for _ in range(round(seconds / step)):
            self.clock[0] += step
            self.session.run_timed(1_000_000)

    def now(self) -> float:
        return self.session.feed.now()


def stopped_outside(sim: SimJob) -> object:
    """The prober's view on the monitor's host: the culprit's process stopped (SIGSTOP)."""
    pid = sim.report(CULPRIT, sim.start).pid  # type: ignore[union-attr]

    def view(host: str, p: int) -> Seen | None:
        return Seen(Sample(p, 0.0, "T"), Sample(p, 1.0, "T")) if p == pid else None

    return view


@contextmanager
def live(endpoint: str, world: int = 16, key: keys.JobKey | None = None) -> Iterator[Live]:
    sim = SimJob(world=world, ranks_per_host=8).hang(CULPRIT, at=20)
    clock = [0.0]
    records = (MessageRecord(t, raw) for t, raw in sim.stream(until=600))
    feed = ReplayFeed(records, speed=1.0, clock=lambda: clock[0])
    server = AttachServer(endpoint, key)
    monitor = Monitor(Detector(probe=sim.probe, outside=stopped_outside(sim)), screens=server)  # type: ignore[arg-type]
    tracker = OverviewTracker()
    session = Session(feed, monitor, on_tick=lambda now: tracker.observe(monitor, now))
    try:
        yield Live(endpoint, sim, monitor, server, session, clock, tracker)
    finally:
        session.close()


PATIENT = 3600.0
"""A screen attached to a monitor whose clock the test moves hears nothing while the test
waits: on a loaded machine that may be longer than a real monitor is ever silent, and a
screen that says hello again waits for a catch-up the monitor sends only when it ticks."""


def attach(job: Live, key: keys.JobKey | None = None) -> AttachedFeed:
    """A screen's feed, attached once the monitor's next ticks have answered it."""
    feed = AttachedFeed(job.endpoint, key, silent_after=PATIENT)

    def answered() -> bool:
        job.advance(0.5)
        return feed.caught_up.wait(0.05)

    wait_until(answered, 20, "the monitor's answer")
    assert feed.attach(0) is None
    return feed


def test_screens_attach_beside_the_ranks_address() -> None:
    assert viewer_address("tcp://node001:5599") == "tcp://node001:5600"
    assert viewer_address("tcp://[::1]:29555") == "tcp://[::1]:29556"
    assert viewer_address("ipc:///tmp/distmon-1000/monitor.sock") == "ipc:///tmp/distmon-1000/monitor.sock.view"
    with pytest.raises(EndpointError, match="no port after its own"):
        viewer_address("tcp://node001:65535")


def test_a_screen_attached_late_shows_what_the_monitor_shows(endpoint: str) -> None:
    """The job as it stands, every alert so far, the monitor's verdict on the culprit's process
    (a screen has no prober): the same header, word for word, and the same facts per rank."""
    with live(endpoint) as job:
        job.advance(30)  # healthy for 20 s, then rank 5 stops: named before the screen attaches
        assert [a.kind for a in job.monitor.alerts.history] == ["hang"]
        feed = attach(job)
        follower = AttachedMonitor(feed)
        tracker = OverviewTracker(feed.progress)
        screen = Session(feed, follower, on_tick=lambda now: tracker.observe(follower, now))
        job.advance(10)
        now = job.now()
        mine, theirs = follower.state, job.monitor.state

        def taken_in() -> bool:  # the last batch before `now` may come in several pieces
            screen.drain()
            return feed.now() >= now and mine.raw_reports() == theirs.raw_reports()

        wait_until(taken_in, 10, "the stream up to the monitor's clock")
        assert feed.now() == now
        seen, shown = job.tracker.overview(job.monitor, now), tracker.overview(follower, now)
        assert shown.culprits == {CULPRIT} and shown.doing == "stopped (SIGSTOP)"
        assert (headline(shown).plain, story(shown).plain) == (headline(seen).plain, story(seen).plain)
        assert [(a.key, a.t, a.severity, a.summary, a.detail) for a in follower.alerts.history] == [
            (a.key, a.t, a.severity, a.summary, a.detail) for a in job.monitor.alerts.history
        ]
        assert follower.alerts.active.keys() == job.monitor.alerts.active.keys()
        assert np.array_equal(mine.silent(now), theirs.silent(now))
        assert np.array_equal(mine.stalled(now), theirs.stalled(now))
        assert np.array_equal(mine.cols.received[: theirs.world], theirs.cols.received[: theirs.world])
        feed.close()


def test_an_alert_raised_while_screens_are_attached_reaches_each_with_its_words(endpoint: str) -> None:
    with live(endpoint) as job:
        job.advance(5)
        screens = [attach(job), attach(job)]
        followers = [AttachedMonitor(feed) for feed in screens]
        sessions = [Session(feed, f) for feed, f in zip(screens, followers, strict=True)]
        job.advance(30)
        wait_until(lambda: all(feed.now() >= job.now() for feed in screens), 10, "both streams")
        for session, follower in zip(sessions, followers, strict=True):
            session.drain()
            assert [a.headline for a in follower.alerts.history] == [a.headline for a in job.monitor.alerts.history]
            named = first_cause(follower.alerts.active.values())
            assert named is not None and named.doing.keys() == {CULPRIT}, "what the culprit does, in the alert's words"
        for feed in screens:
            feed.close()


def test_a_screen_keeps_the_monitors_alerts_through_their_lives() -> None:
    """Raised, escalated, resolved, as the monitor's book went: the same alerts, the same times."""
    theirs, mine = AlertBook(), AlertBook()
    found = Finding("hang:2", "hang", WARNING, [2], "rank 2 is writing a checkpoint", "what it does")
    for findings, t in (([found], 10.0), ([replace(found, severity=CRITICAL)], 11.0), ([], 12.0)):
        for change in theirs.update(findings, t):
            told = Alert.from_json(change.alert.to_json(), key=change.alert.key)
            followed = mine.follow(change.event, told, t)
            assert followed is not None and (followed.event, followed.escalated) == (change.event, change.escalated)
    assert [(a.key, a.t, a.resolved, a.severity) for a in mine.history] == [(found.key, 10.0, 12.0, CRITICAL)]
    assert not mine.active
    assert mine.follow("resolved", told, 13.0) is None, "a resolution of an alert not standing is dropped"


class Told:
    """What a monitor told, handed over once: a screen's feed as its AttachedMonitor reads it."""

    def __init__(self, told: list[Any]) -> None:
        self.told = told

    def take_told(self) -> list[Any]:
        told, self.told = self.told, []
        return told


def test_a_screen_says_a_rank_pauses_as_usual_as_the_monitor_learned_it() -> None:
    """A habit is the monitor's detector's to learn (``rules/routine.py``): the screen shows the
    rank's status and its peers' in the monitor's words, from its tick."""
    sim = SimJob(world=4)
    now = sim.start + 10
    usual = "pausing as usual: upload_metrics, about 3s every 25 steps"
    _, tick = read([numbered(0), tick_message(now, Counter(), Counter(), {}, {0: usual})])
    follower = AttachedMonitor(Told([tick]))
    follower.ingest_batch(Batch.of([encode(sim.report(rank, now)) for rank in range(4)]), now)  # type: ignore[arg-type]
    follower.tick(now)
    story = Story.of(follower, now)
    assert story.status(follower.state.ranks[0]) == usual


SCREEN = """
import sys
from distmon.monitor.attach.feed import AttachedFeed
from distmon.monitor.attach.follow import AttachedMonitor
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import CRITICAL, WARNING, Alert, AlertBook, Finding
from distmon.monitor.state.ending import first_cause
feed = AttachedFeed(sys.argv[1])
print(feed.attach(30) or "attached", flush=True)
follower, first = AttachedMonitor(feed), feed.catch_ups
session = Session(feed, follower)
for line in sys.stdin:  # the test says when to tell what it shows
    session.drain()
    shown = sorted(r for a in follower.alerts.active.values() for r in a.ranks)
    print(feed.catch_ups, follower.state.received, feed.now(), shown, flush=True)
"""


def test_a_stopped_screen_is_skipped_not_waited_for_and_catches_up_once_continued(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A screen stopped with SIGSTOP takes nothing: the monitor holds at most its backlog for
    it, then skips it, and goes on; continued, the screen notices and catches up. (The backlog
    held for a screen is made an eighth of the product's, so that the stream that overflows it
    costs the test a quarter.)"""
    monkeypatch.setattr(serve, "BACKLOG_BYTES", serve.BACKLOG_BYTES // 8)
    with live(endpoint, world=1024) as job:
        screen = subprocess.Popen(
            [sys.executable, "-c", SCREEN, endpoint], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        assert screen.stdin is not None and screen.stdout is not None
        try:
            wait_until(lambda: job.server.attached, 30, "the screen's hello")
            job.advance(1.0)
            assert screen.stdout.readline().strip() == "attached"
            screen.send_signal(signal.SIGSTOP)
            job.advance(32)  # 1024 ranks' reports for 32 s: about 16 MB, more than is held and queued for it
            wait_until(lambda: job.server.skips == 1, 30, "the server's thread to skip it")  # behind, on a loaded host
            assert [a.kind for a in job.monitor.alerts.history] == ["hang"], "the monitor went on"
            assert job.server.held() == 0, "skipped: nothing held for it"
            wait_until(lambda: not job.server.attached, 10, "nothing handed over for it")
            screen.send_signal(signal.SIGCONT)

            def caught_up_again() -> list[str]:
                job.advance(0.5)
                screen.stdin.write("\n")  # type: ignore[union-attr]
                screen.stdin.flush()  # type: ignore[union-attr]
                said = screen.stdout.readline().strip().split(maxsplit=3)  # type: ignore[union-attr]
                return said if int(said[0]) >= 2 else []

            said = wait_until(caught_up_again, 60, "the continued screen to catch up again")
            assert said[3] == f"[{CULPRIT}]", said
            assert float(said[2]) >= job.now() - 1, ("on the monitor's clock again", said, job.now())
        finally:
            screen.kill()
            screen.wait()


def test_a_keyed_monitor_shows_the_job_only_to_screens_holding_its_key(tmp_path: Path) -> None:
    key = keys.generate(str(tmp_path / "job.key"))
    other = keys.generate(str(tmp_path / "other.key"))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    with live(endpoint, key=key) as job:
        feed = attach(job, key)
        assert feed.catch_ups == 1
        feed.close()
        for wrong, words in ((None, "shows the job only to holders of its key"), (other, "another job's")):
            refused = AttachedFeed(endpoint, wrong)
            problem = wait_until(refused.refused, 10, "the refusal")
            assert words in problem
            refused.close()


def test_a_keyed_screen_told_the_monitor_has_no_key(endpoint: str, tmp_path: Path) -> None:
    with live(endpoint):
        keyed = AttachedFeed(endpoint, keys.generate(str(tmp_path / "job.key")))
        assert wait_until(keyed.refused, 10, "the refusal") == (
            f"the monitor at {endpoint} has no job key: attach without one (no --key-file, no $DISTMON_KEY_FILE)"
        )
        keyed.close()


def test_a_keyed_recorder_refuses_a_screen_without_its_key_in_one_line(tmp_path: Path) -> None:
    keys.generate(str(tmp_path / "job.key"))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    with recording(tmp_path / "run.distmon", endpoint, "--key-file", str(tmp_path / "job.key")):
        done = distmon("watch", "--attach", endpoint)
    assert done.returncode == 2
    assert done.stderr == (
        f"distmon watch: the monitor at {endpoint} shows the job only to holders of its key: "
        "give --key-file FILE (or $DISTMON_KEY_FILE), the job's key file\n"
    )


def test_a_screen_with_no_monitor_at_the_address_says_so_in_one_line(new_endpoint: object) -> None:
    endpoint = new_endpoint()  # type: ignore[operator]
    began = time.monotonic()
    done = distmon("watch", "--attach", endpoint)
    assert time.monotonic() - began < 15
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"distmon watch: no monitor at {endpoint}: nothing listens at {endpoint}.view, where its screens attach\n"
    )


def test_the_monitors_own_options_are_refused_on_a_screen() -> None:
    done = distmon("watch", "--attach", "--evidence", "bundles")
    assert done.returncode == 2
    assert (
        done.stderr.startswith("distmon watch: --evidence is the monitor's own option") and done.stderr.count("\n") == 1
    )


def test_a_damaged_or_foreign_message_from_the_monitor_is_refused_never_raised(endpoint: str) -> None:
    """Messages as the monitor sends them, cut and with bytes flipped: each is read or refused
    as a :class:`AttachError`, never anything else."""
    with live(endpoint) as job:
        job.advance(25)
        feed = AttachedFeed(endpoint, silent_after=PATIENT)
        captured: list[list[bytes]] = []
        original = feed._take
        feed._take = lambda frames: (captured.append(frames), original(frames))  # type: ignore[method-assign]
        wait_until(lambda: job.server.attached, 10, "the screen's hello")

        def messages() -> bool:
            job.advance(0.5)
            return len(captured) > 5

        wait_until(messages, 20, "messages")
        feed.close()
    rng = random.Random(40)
    for _ in range(3000):
        frames = [bytearray(f) for f in rng.choice(captured)]
        record = frames[1]
        for _ in range(rng.randint(1, 4)):
            record[rng.randrange(len(record))] = rng.randrange(256)
        if rng.random() < 0.3:
            del record[rng.randrange(len(record)) :]
        with suppress(AttachError):
            read([bytes(f) for f in frames])
