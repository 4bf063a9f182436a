"""Fault injection with real parts: 3 gloo ranks under torchrun with the hook, a real
`distmon record` process listening, and the alerts read back with `distmon report --json`.

Each fault asserts its alert's kind, its culprit rank, and, where it is a fault that stops
the job, that the alert came within a bound far under the job's 120 s collective timeout.
A fault that stops the job has a job of its own; the straggler and the leak pass, so they
share one job with a healthy first epoch before them and a clean end after them. The faults
that end the job by themselves (a raise, a SIGKILL, a DataLoader worker killed) are
tests/jobs/test_recorder_stopped_jobs.py's, twelve jobs for the cost of one here.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.recording.readback import load_recording
from tests.support.recorder import Recorder, recording

COLLECTIVE_TIMEOUT = 120.0
INJECTED = re.compile(r"\[train\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")
RANKS = 3
"""Enough for a culprit with more than one victim; a rank fewer than 4 starts seconds sooner."""


@pytest.fixture
def recorder(endpoint: str, tmp_path: Path) -> Iterator[Recorder]:
    with recording(tmp_path / "run.distmon", endpoint) as listening:
        yield listening


def run_fault(
    torchrun: Callable,
    endpoint: str,
    recorder: Recorder,
    fault: str,
    kind: str,
    *extra: str,
    wait: float = 60,
) -> tuple[list[dict], float | None]:
    """Run the job until the alert shows; the alerts and the injection time."""
    args = ["--fault", fault, "--fault-rank", "2", "--fault-step", "20", "--timeout", str(COLLECTIVE_TIMEOUT), *extra]
    with torchrun(RANKS, *args, endpoint=endpoint, interval=1.0) as job:
        recorder.wait_critical(kind, wait, job)
        job.process.send_signal(signal.SIGTERM)
        job.wait(30)
    injected = INJECTED.search(job.output)
    return recorder.alerts(), float(injected.group(3)) if injected else None


FAULTS = [
    # (fault, expected kind, bound in seconds after the injection, extra job arguments)
    ("hang", "hang", 15, ()),
    ("extra-collective", "divergence", 15, ()),
    ("uneven", "divergence", 15, ("--steps", "30")),
]
"""A rank holding the GIL is test_stopped_and_working_ranks_jobs.py's (one alert, critical, its
native call named) and test_actions_jobs.py's (held until the job is ended): a job here too
would test nothing new."""


@pytest.mark.parametrize(("fault", "kind", "bound", "extra"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_is_named_in_seconds(torchrun, endpoint, recorder, fault, kind, bound, extra) -> None:
    alerts, injected_at = run_fault(torchrun, endpoint, recorder, fault, kind, *extra)
    matching = [a for a in alerts if a["kind"] == kind]
    assert matching, f"no {kind} alert: {[(a['kind'], a['ranks'], a['summary']) for a in alerts]}"
    alert = matching[0]
    assert alert["ranks"] == [2], alert
    assert set(alert) == {"kind", "severity", "ranks", "t", "summary", "detail"}
    assert injected_at is not None
    assert alert["t"] - injected_at <= bound < COLLECTIVE_TIMEOUT
    wrong = [a for a in alerts if a["severity"] == "critical" and a["ranks"] and 2 not in a["ranks"]]
    assert not wrong, f"alerts naming victims: {wrong}"
    if fault == "hang":  # killed mid-hang: the job was stopped, not finished, and the hang ended with it
        ended = load_recording(str(recorder.out))
        every_rank = f"ranks 0-{RANKS - 1}"
        assert ended.ending().startswith(f"stopped while hung: {every_rank} terminated by SIGTERM"), ended.ending()
        assert all(a.resolved is None for a in ended.alerts), ended.alerts


PASSING_FAULTS = 70
"""The step at which rank 2 starts to straggle and leak: ten steps into the second of five
epochs of 60, so the first epoch and a restart of the DataLoader workers come before. A
straggling step takes ``STEP_TIME * STRAGGLER_FACTOR`` (0.2 s) at least, so the 230 steps left
outlast the straggler's ``PASSING_SECONDS`` on the fastest machine: the job does not end before a
loaded host's monitor is sure of it."""
STEP_TIME = 0.08
STRAGGLER_FACTOR = 2.5
"""Rank 2's steps 2.5 times the others': its peers wait 0.12 s a step for it, well above the
scheduler's own delays on a host as loaded as a full CI's (the straggler rule excuses a hold-up
within twice the share of the time a rank waited for a CPU, :data:`distmon.monitor.rules.pace.SCHEDULED`),
and each step stays within ``PAUSE_STEPS`` (3) of the ranks' median step: a step longer is a pause,
which the ranks leave out of their pace until their median catches up."""
PASSING_SECONDS = 20
"""The straggler's seconds: it is named within 10 s on a loaded 2-core machine at a 0.5 s report
interval, and the job steps on through them."""
LEAK_SECONDS = 12
"""The leak's: named within 10 s too, and 32 MB a step for 12 s at most keeps the rank under
2 GB more."""


@dataclass
class PassingFaultsJob:
    exit_code: int
    output: str
    alerts: list[dict]
    injected: dict[str, float]
    """Injection time by fault."""
    recording: Path


@pytest.fixture(scope="module")
def passing_faults(torchrun, new_endpoint, tmp_path_factory) -> PassingFaultsJob:
    """One job for the healthy run, the straggler and the leak: a job that needs no killing
    can show all three, and each job start costs seconds of CPU for every rank."""
    endpoint = new_endpoint()
    args = ["--steps", "60", "--epochs", "5", "--workers", "2", "--timeout", str(COLLECTIVE_TIMEOUT)]
    args += ["--fault", f"straggler@{PASSING_FAULTS}:2:{PASSING_SECONDS}"]
    args += ["--fault", f"leak@{PASSING_FAULTS}:2:{LEAK_SECONDS}"]
    args += ["--leak-mb", "32"]  # a straggling rank steps slowly: 160 MB/s leaked all the same
    args += ["--step-time", str(STEP_TIME), "--straggler-factor", str(STRAGGLER_FACTOR)]
    with recording(tmp_path_factory.mktemp("passing") / "run.distmon", endpoint) as recorder:
        with torchrun(RANKS, *args, endpoint=endpoint, interval=0.5) as job:
            exit_code = job.wait(180)
        if exit_code == 0:
            recorder.wait_recorded(
                "every rank's exit", lambda reports: sum(r.exit is not None for r in reports) == RANKS
            )
        alerts = recorder.alerts()
    injected = {fault: float(t) for _, fault, t in INJECTED.findall(job.output)}
    return PassingFaultsJob(exit_code, job.output, alerts, injected, recorder.out)


def test_healthy_run_raises_nothing(passing_faults: PassingFaultsJob) -> None:
    """Start-up, first steps, DataLoader workers restarting between epochs, the clean end:
    nothing about the job before the first fault, and nothing after it but the faults' own alerts. (The
    monitor saying it was itself behind, its loop starved on a loaded host, is about the monitor.)"""
    job = passing_faults
    assert job.exit_code == 0, job.output[-3000:]
    assert sorted(job.injected) == ["leak", "straggler"], job.output[-3000:]
    about_the_job = [a for a in job.alerts if a["kind"] != "monitor_behind"]
    before = [a for a in about_the_job if a["t"] < min(job.injected.values())]
    assert before == [], before
    others = [a for a in about_the_job if a["kind"] not in ("straggler", "memory_pressure") or a["ranks"] != [2]]
    assert others == [], others
    assert load_recording(str(job.recording)).ending() == "finished: every rank exited cleanly"


def test_straggler_is_named(passing_faults: PassingFaultsJob) -> None:
    stragglers = [a for a in passing_faults.alerts if a["kind"] == "straggler"]
    assert stragglers and stragglers[0]["ranks"] == [2], passing_faults.alerts


def test_memory_growth_is_named_before_the_oom(passing_faults: PassingFaultsJob) -> None:
    leaks = [a for a in passing_faults.alerts if a["kind"] == "memory_pressure"]
    assert leaks and leaks[0]["ranks"] == [2], passing_faults.alerts
    assert leaks[0]["t"] - passing_faults.injected["leak"] <= 45
