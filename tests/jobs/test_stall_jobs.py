"""Stalls outside the training loop with real ranks under ``distmon run``: a rank late to
``init_process_group``, and every DataLoader worker blocked in ``__getitem__``. Each job is
killed mid-stall, as a person would, so each also shows how a job killed while hung ends.
Three ranks each: a culprit with more than one peer waiting for it.

The two jobs run side by side: the late rank's stall is named only after 30 s of waiting
(slow starters get that long), time the other job fills."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.recording.readback import load_recording
from tests.support.commands import DISTMON, TORCHRUN, distmon
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.recorder import alert_detail
from tests.support.waiting import wait_until

JOB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "1"}
INJECTED = re.compile(r"\[train\] rank -?\d+: injecting \S+ at step \d+, t=([\d.]+)")


@dataclass
class Stalled:
    alerts: list[dict]
    """As ``distmon report --json`` gives them."""
    text: str
    """The text report."""
    injected: float


class StallingJob:
    """The unmodified example under ``distmon run --record``, started at once; ``stop``
    sends SIGTERM once the stall alert is up."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.out, self.log = directory / "run.distmon", directory / "job.log"
        job = [TORCHRUN, "--standalone", "--nproc_per_node=3", str(TRAIN), *args]
        with self.log.open("w") as output:
            self.process = start(
                [*DISTMON, "run", "--record", str(self.out), "--", *job],
                env=JOB_ENV,
                stdout=output,
                stderr=subprocess.PIPE,
                text=True,
            )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self.lines.extend, args=(self.process.stderr,), daemon=True)
        self._reader.start()

    def stop(self, evidence: str, wait: float = 75) -> Stalled:
        """Once the recorded stall alert shows ``evidence`` (a stack taken from outside lands
        in an update after the alert), as a person would: the alerts, the text report, and
        when the fault was injected."""
        try:
            try:
                wait_until(
                    lambda: evidence in alert_detail(self.out, "stall"), wait, f"a stall alert showing {evidence!r}"
                )
            except AssertionError as e:
                raise AssertionError(f"{e}; distmon said:\n{''.join(self.lines)[-3000:]}") from None
            self.process.send_signal(signal.SIGTERM)  # forwarded to torchrun, which stops its ranks
            assert self.process.wait(60) != 0
        finally:
            self.kill()
        self._reader.join(5)
        alerts = json.loads(distmon("report", self.out, "--json", check=True).stdout)
        text = distmon("report", self.out, check=True).stdout
        injected = INJECTED.search(self.log.read_text())
        assert injected, self.log.read_text()[-3000:]
        assert all(a.resolved is None for a in load_recording(str(self.out)).alerts), "an alert resolved by the kill"
        return Stalled(alerts, text, float(injected.group(1)))

    def kill(self) -> None:
        kill_tree(self.process)


@pytest.fixture(scope="module")
def stalls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Stalled]:
    late_dir, blocked_dir = tmp_path_factory.mktemp("late-init"), tmp_path_factory.mktemp("loader-block")
    late = StallingJob(late_dir, "--fault", "late-init", "--fault-rank", "1", "--timeout", "120", "--workers", "0")
    try:
        blocked = StallingJob(
            blocked_dir, "--fault", "loader-block", "--fault-rank", "-1", "--fault-step", "10", "--timeout", "120"
        )
        try:
            return {
                "loader-block": blocked.stop("time.sleep(self.block[1])"),
                "late-init": late.stop("time.sleep(fault.seconds)"),
            }
        finally:
            blocked.kill()
    finally:
        late.kill()


def test_a_rank_late_to_init_is_named_with_where_it_is(stalls: dict[str, Stalled]) -> None:
    alerts, text, injected_at = stalls["late-init"].alerts, stalls["late-init"].text, stalls["late-init"].injected
    (stall,) = [a for a in alerts if a["kind"] == "stall"]
    assert stall["ranks"] == [1], stall
    assert stall["t"] - injected_at <= 60
    assert stall["summary"].startswith("rank 1 is asleep in clock_nanosleep; ranks 0, 2 wait "), stall
    assert "in init_process_group" in stall["summary"]
    assert "rank 1 (" in stall["detail"] and "sleeping:" in stall["detail"]
    assert "time.sleep(fault.seconds)" in stall["detail"]
    assert "No alerts" not in text
    # named early as a warning (it does nothing while the others wait); the job is taken down
    # before the warning turns critical, so it ends stopped, not stopped while hung
    assert stall["severity"] == "warning" or "while the stall alert stood" in text
    assert "Ended: stopped" in text and "ranks 0-2 terminated by SIGTERM" in text


def test_blocked_dataloader_workers_are_named_with_their_own_frame(stalls: dict[str, Stalled]) -> None:
    alerts, text = stalls["loader-block"].alerts, stalls["loader-block"].text
    (stall,) = [a for a in alerts if a["kind"] == "stall"]
    assert stall["ranks"] == [0, 1, 2], stall
    assert stall["summary"].startswith("all 3 ranks waiting for a DataLoader batch for "), stall
    detail = stall["detail"]
    assert re.search(r"waits for [\d.]+s for batch #10 from worker 0 \(pid \d+, alive\)", detail), detail
    assert "in __getitem__" in detail and "time.sleep(self.block[1])" in detail, detail
    assert "Ended: stopped while hung" in text
