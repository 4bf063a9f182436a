"""Fault injection with real parts: 4 gloo ranks under torchrun with the hook, a real
`distmon record` process listening, and the alert read back with `distmon report --json`.

Each test asserts the alert's kind, its culprit rank, and that it came within a bound far
under the job's 120 s collective timeout.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distmon.monitor.postmortem import load

pytestmark = pytest.mark.torchrun

COLLECTIVE_TIMEOUT = 120.0
INJECTED = re.compile(r"\[train\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")


class Recorder:
    """``distmon record`` as a user runs it, in its own process."""

    def __init__(self, endpoint: str, out: Path) -> None:
        self.out = out
        self.log = out.with_suffix(".log")
        self._log = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "distmon", "record", "--out", str(out), "--endpoint", endpoint],
            stderr=self._log,
        )

    def wait_for_alert(self, kind: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if f" {kind}: " in self.log.read_text():
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> list[dict]:
        self.process.send_signal(signal.SIGINT)
        assert self.process.wait(10) == 0, self.log.read_text()
        self._log.close()
        report = subprocess.run(
            [sys.executable, "-m", "distmon", "report", str(self.out), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(report.stdout)


@pytest.fixture
def recorder(endpoint: str, tmp_path: Path) -> Iterator[Recorder]:
    rec = Recorder(endpoint, tmp_path / "run.distmon")
    yield rec
    if rec.process.poll() is None:
        rec.process.kill()
        rec.process.wait()


def run_fault(
    torchrun: Callable,
    endpoint: str,
    recorder: Recorder,
    fault: str,
    kind: str,
    *extra: str,
    wait: float = 60,
    settle: float = 0.0,
) -> tuple[list[dict], float | None]:
    """Run the job until the alert shows (or ``wait`` runs out) and ``settle`` seconds more
    (for evidence that follows the alert); the alerts and the injection time."""
    args = ["--fault", fault, "--fault-rank", "2", "--fault-step", "20", "--timeout", str(COLLECTIVE_TIMEOUT), *extra]
    with torchrun(4, *args, endpoint=endpoint, interval=1.0) as job:
        recorder.wait_for_alert(kind, wait)
        time.sleep(settle)
        job.process.send_signal(signal.SIGTERM)
        job.wait(30)
    injected = INJECTED.search(job.output)
    return recorder.stop(), float(injected.group(3)) if injected else None


FAULTS = [
    # (fault, expected kind, bound in seconds after the injection, extra job arguments)
    ("hang", "hang", 15, ()),
    ("extra-collective", "divergence", 15, ()),
    ("uneven", "divergence", 15, ("--steps", "40")),
    ("exception", "rank_exception", 5, ()),
    ("sigkill", "rank_lost", 10, ()),
    ("worker-kill", "worker_crash", 5, ()),
    ("gil", "rank_lost", 15, ()),
]


@pytest.mark.parametrize(("fault", "kind", "bound", "extra"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_is_named_in_seconds(torchrun, endpoint, recorder, fault, kind, bound, extra) -> None:
    settle = 3.0 if fault == "gil" else 0.0  # its stack is taken from outside, after the alert
    alerts, injected_at = run_fault(torchrun, endpoint, recorder, fault, kind, *extra, settle=settle)
    matching = [a for a in alerts if a["kind"] == kind]
    assert matching, f"no {kind} alert: {[(a['kind'], a['ranks'], a['summary']) for a in alerts]}"
    alert = matching[0]
    assert alert["ranks"] == [2], alert
    assert set(alert) == {"kind", "severity", "ranks", "t", "summary", "detail"}
    assert injected_at is not None
    assert alert["t"] - injected_at <= bound < COLLECTIVE_TIMEOUT
    wrong = [a for a in alerts if a["severity"] == "critical" and a["ranks"] and 2 not in a["ranks"]]
    assert not wrong, f"alerts naming victims: {wrong}"
    if fault == "gil":  # its own frame, taken from outside: none of its threads can run
        assert "holding the GIL" in alert["detail"] and "ctypes.PyDLL(None).sleep" in alert["detail"], alert
    if fault == "hang":  # killed mid-hang: the job was stopped, not finished, and the hang ended with it
        ended = load(str(recorder.out))
        assert ended.ending().startswith("stopped while hung: ranks 0-3 terminated by SIGTERM"), ended.ending()
        assert all(a.resolved is None for a in ended.alerts), ended.alerts


def test_straggler_is_named(torchrun, endpoint, recorder) -> None:
    alerts, _ = run_fault(torchrun, endpoint, recorder, "straggler", "straggler", "--steps", "400", wait=45)
    stragglers = [a for a in alerts if a["kind"] == "straggler"]
    assert stragglers and stragglers[0]["ranks"] == [2], alerts


def test_memory_growth_is_named_before_the_oom(torchrun, endpoint, recorder) -> None:
    alerts, injected_at = run_fault(torchrun, endpoint, recorder, "leak", "memory_pressure", "--steps", "800", wait=60)
    leaks = [a for a in alerts if a["kind"] == "memory_pressure"]
    assert leaks and leaks[0]["ranks"] == [2], alerts
    assert injected_at is not None and leaks[0]["t"] - injected_at <= 45


def test_healthy_run_raises_nothing(torchrun, endpoint, recorder) -> None:
    """Start-up, first steps, DataLoader workers restarting between epochs, the clean end."""
    with torchrun(
        4, "--steps", "60", "--epochs", "2", "--timeout", str(COLLECTIVE_TIMEOUT), endpoint=endpoint, interval=1.0
    ) as job:
        assert job.wait(120) == 0, job.output[-3000:]
    time.sleep(2)
    assert recorder.stop() == []
