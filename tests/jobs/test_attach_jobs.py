"""Screens attached to a real monitor: ``distmon record`` watching a real 4-rank gloo job whose
rank 2 stops itself (SIGSTOP), and two screens, ``distmon watch --attach`` in a tmux pane as a
user types it and the same app under Textual's Pilot, attaching, quitting and attaching again,
each naming the culprit in the monitor's words: ``stopped (SIGSTOP)`` is what the monitor's
prober saw on the job's host, which a screen cannot see itself. One job for every test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.attach.feed import AttachedFeed
from distmon.monitor.attach.follow import AttachedMonitor
from distmon.monitor.overview import OverviewTracker
from distmon.tui.app import DistmonApp, build_app
from tests.support.recorder import Recorder, recording
from tests.support.torchrun import Torchrun
from tests.support.waiting import wait_until

pytestmark = pytest.mark.anyio

TMUX = ["tmux", "-L", f"distmon-tests-{os.getpid()}"]
"""A tmux server of this test run's own: others' runs on the machine use their own."""
NAMED = "rank 2 stopped (SIGSTOP)"
"""The header's culprit, in the words of the monitor's prober."""


@dataclass
class Watched:
    endpoint: str
    recorder: Recorder
    job: Torchrun


@pytest.fixture(scope="module")
def watched(torchrun: Callable[..., Torchrun], new_endpoint: Callable[[], str], tmp_path_factory) -> Iterator[Watched]:
    """The recorder, and the job stopped at rank 2 (continued after 5 minutes, well after the
    tests: the collective timeout is longer) once the recorder has named it."""
    endpoint = new_endpoint()
    out = tmp_path_factory.mktemp("attached") / "run.distmon"
    with recording(out, endpoint) as recorder:
        args = ("--steps", "2000", "--fault", "stop@8:2:300", "--timeout", "600")
        with torchrun(4, *args, endpoint=endpoint, interval=0.5) as job:
            recorder.wait_critical("hang", timeout=180, job=job)
            yield Watched(endpoint, recorder, job)


class Pane:
    """``distmon watch --attach ENDPOINT`` in a tmux pane of its own, as a user types it."""

    def __init__(self, endpoint: str, name: str, exited: Path) -> None:
        self.name = name
        self.exited = exited
        exited.unlink(missing_ok=True)
        command = f"{sys.executable} -m distmon watch --attach {endpoint}; echo $? > {exited}"
        env = {"TERM": "xterm-256color", "PATH": os.environ["PATH"]}
        tmux = [*TMUX, "new-session", "-d", "-s", name, "-x", "140", "-y", "36"]
        subprocess.run([*tmux, *(f"-e{k}={v}" for k, v in env.items()), command], check=True, timeout=30)

    def screen(self) -> str:
        captured = subprocess.run(
            [*TMUX, "capture-pane", "-p", "-t", self.name],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return captured.stdout

    def press(self, key: str) -> None:
        subprocess.run([*TMUX, "send-keys", "-t", self.name, key], check=True, timeout=30)

    def exit_status(self) -> int:
        # the shell creates the file, then writes the status: wait for the status
        def written() -> str:
            return self.exited.read_text().strip() if self.exited.exists() else ""

        return int(wait_until(written, 30, f"the screen in {self.name} to exit"))

    def kill(self) -> None:
        subprocess.run([*TMUX, "kill-session", "-t", self.name], timeout=30)


async def named_on_pilot(endpoint: str) -> tuple[str, list[tuple[str, float]]]:
    """The app of ``distmon watch --attach``, built as the command builds it, under Pilot until it
    names the culprit; then quit with ``q``. What its header said, and its alerts."""
    feed = AttachedFeed(endpoint)
    assert feed.attach(30) is None
    app: DistmonApp = build_app(feed, AttachedMonitor(feed), OverviewTracker(feed.progress))
    async with app.run_test(size=(140, 36)) as pilot:
        for _ in range(300):
            if app.overview.culprits == {2} and app.overview.doing == "stopped (SIGSTOP)":
                break
            await pilot.pause(0.1)
        header = str(app.header.render())
        alerts = [(a.kind, a.t) for a in app.monitor.alerts.history]
        await pilot.press("q")
    return header, alerts


def recorded_alerts(recorder: Recorder) -> list[tuple[str, float]]:
    from distmon.monitor.recording.format import AlertEvent
    from distmon.monitor.recording.reader import read_recording

    _, records = read_recording(str(recorder.out))
    return [(r.alert.kind, r.alert.t) for r in records if isinstance(r, AlertEvent) and r.event == "raised"]


async def test_two_screens_attach_quit_and_attach_again_each_naming_the_culprit(
    watched: Watched, tmp_path: Path
) -> None:
    for attempt in range(2):
        pane = Pane(watched.endpoint, f"screen-{attempt}", tmp_path / f"exited-{attempt}")
        try:
            header, alerts = await named_on_pilot(watched.endpoint)
            assert NAMED in header, header
            assert alerts == recorded_alerts(watched.recorder), "every alert so far, as the monitor raised it"
            shown = wait_until(lambda p=pane: NAMED in p.screen() and p.screen(), 60, "the pane naming the culprit")  # type: ignore[misc]
            assert re.search(r"attached · ipc://\S+", shown), shown
            pane.press("q")
            assert pane.exit_status() == 0
        finally:
            pane.kill()
        messages = len(watched.recorder.reports())
        wait_until(lambda n=messages: len(watched.recorder.reports()) > n, 30, "the monitor recording on")  # type: ignore[misc]
        assert watched.recorder.process.poll() is None, watched.recorder.stderr()


def test_a_screen_killed_leaves_the_monitor_running(watched: Watched, tmp_path: Path) -> None:
    pane = Pane(watched.endpoint, "killed", tmp_path / "exited")
    try:
        wait_until(lambda: NAMED in pane.screen(), 60, "the pane naming the culprit")
    finally:
        pane.kill()  # its terminal gone: the screen dies with it
    messages = len(watched.recorder.reports())
    wait_until(lambda: len(watched.recorder.reports()) > messages, 30, "the monitor recording on")
    assert watched.recorder.process.poll() is None, watched.recorder.stderr()
    assert "Traceback" not in watched.recorder.stderr()
