"""The faults that end a job by themselves, a recorder stopped the moment the job ends: real
3-rank gloo jobs of ``examples/train.py`` that end within a second of their fault (rank 2
raises, is SIGKILLed, or loses a DataLoader worker to SIGKILL and raises at once), torchrun's
agent tearing the others down, and ``distmon record`` stopped by SIGINT or SIGTERM as soon as
the job has ended. (The faults a job does not end of: tests/jobs/test_faults.py.)

Each fault runs twice per signal; one run, a module's fixture, serves every assertion on it.
Whatever the machine's load, the fault's alert names rank 2 within seconds and no victim, the
file holds every alert line the recorder printed, in order, and every message it counted, and
what ``distmon report`` prints ends the job as the live monitor named it. The jobs' ranks are
forked from a process that imported torch once (:mod:`tests.support.forked`): a run costs a
second or two of CPU, not torch's import in every rank. Stopped by other means (SIGHUP,
SIGKILL) on a simulated job: tests/unit/test_record_report.py.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from distmon.export.plain import alert_line, render
from distmon.monitor.recording.format import AlertEvent, received
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.state.alerts import Change
from distmon.wire import Report, decode
from tests.support.recorder import Recorder
from tests.support.torchrun import Torchrun

RANKS = 3
"""Enough for a culprit with more than one victim."""
CULPRIT = 2
FAULTS = {"exception": ("rank_exception", 5), "sigkill": ("rank_lost", 10), "worker-kill": ("worker_crash", 5)}
"""Each fault that ends the job, the alert that names its rank, and within how many seconds of
the fault: far under the job's collective timeout (60 s)."""
INJECTED = re.compile(r"\[train\] rank \d+: injecting \S+ at step \d+, t=([\d.]+)")
RUNS = [(fault, sig, again) for again in (1, 2) for sig in (signal.SIGINT, signal.SIGTERM) for fault in FAULTS]
"""Each fault stopped by each signal, twice: a recorder that lost what it said one run in five
would pass twelve runs one suite in fifteen."""


@dataclass
class Run:
    """One job run to its end, its recorder stopped right after."""

    fault: str
    injected: float
    """When the fault was injected, by the rank's clock (the monitor's: one host)."""
    live: list[str]
    """The alert lines the recorder printed on stderr."""
    closing: str
    """Its last line: the messages and ranks it counted."""
    lines: list[str]
    """The lines the recording's alert records make, as the recorder prints them."""
    reports: list[Report]
    text: str
    """What ``distmon report`` prints."""
    alerts: list[dict]
    """What ``distmon report --json`` prints."""


@pytest.fixture(scope="module", params=RUNS, ids=[f"{fault}-{sig.name}-{again}" for fault, sig, again in RUNS])
def run(
    request: pytest.FixtureRequest,
    torchrun: Callable[..., Torchrun],
    new_endpoint: Callable[[], str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    fault, sig, _ = request.param
    endpoint = new_endpoint()
    directory = tmp_path_factory.mktemp("stopped")
    out = directory / "run.distmon"
    recorder = Recorder(out, endpoint)
    try:
        recorder.wait_listening()
        workers = "1" if fault == "worker-kill" else "0"
        args = ["--steps", "40", "--step-time", "0.05", "--workers", workers, "--fault", f"{fault}@20:{CULPRIT}"]
        with torchrun(RANKS, *args, endpoint=endpoint, interval=0.5) as job:
            code = job.wait(180)
        assert code == 1, job.output[-3000:]  # a rank failed: the fault ended the job, not its steps
        injected = INJECTED.search(job.output)
        assert injected is not None, job.output[-3000:]
        recorder.process.send_signal(sig)
        assert recorder.process.wait(60) == 0, recorder.stderr()
    finally:
        recorder.kill()
    err = recorder.stderr().splitlines()
    assert err and err[-1].startswith("distmon record: "), err
    pm = load_recording(str(out))  # what distmon report reads and prints
    assert pm.trouble is None, pm.trouble  # a whole file
    _, records = read_recording(str(out))
    kept = list(records)
    return Run(
        fault=fault,
        injected=float(injected[1]),
        live=[line for line in err if line.startswith("distmon ") and not line.startswith("distmon record: ")],
        closing=err[-1],
        lines=said(kept),
        reports=[decode(frame) for _, frame in received(kept)],
        text=render(pm),
        alerts=[a.to_json() for a in pm.alerts],
    )


def said(records: list) -> list[str]:
    """The lines a recorder prints for the alert changes in ``records``: it prints those it
    writes, at the same tick (an update that turned a warning critical is one)."""
    lines, severity = [], {}
    for record in records:
        if isinstance(record, AlertEvent):
            alert = record.alert
            turned = severity.get(alert.key) != "critical" and alert.severity == "critical"
            escalated = record.event == "updated" and turned
            severity[alert.key] = alert.severity
            if (line := alert_line(Change(record.event, alert, escalated), record.t)) is not None:
                lines.append(line)
    return lines


def test_every_alert_line_the_recorder_printed_is_in_its_file_in_order(run: Run) -> None:
    assert run.live, "the recorder said nothing of the fault"
    assert run.lines == run.live


def test_the_fault_is_named_in_seconds_and_no_victim_is_blamed(run: Run) -> None:
    kind, bound = FAULTS[run.fault]
    assert any(f" CRITICAL {kind}: rank {CULPRIT}" in line for line in run.live), run.live
    named = [a for a in run.alerts if a["kind"] == kind and a["ranks"] == [CULPRIT]]
    assert named and named[0]["t"] - run.injected <= bound, (run.injected, run.alerts)
    wrong = [a for a in run.alerts if a["severity"] == "critical" and a["ranks"] and CULPRIT not in a["ranks"]]
    assert not wrong, f"alerts naming victims: {wrong}"


def test_the_report_ends_the_job_as_the_live_monitor_named_it(run: Run) -> None:
    """The alerts, the ending and the table of ranks tell one story."""
    kind, _ = FAULTS[run.fault]
    lines = run.text.splitlines()
    assert re.match(rf"Ended: failed: {kind}: rank {CULPRIT}\b", lines[2]), run.text
    if run.fault == "sigkill":
        [row] = [line for line in lines if line.startswith(f"  rank     {CULPRIT} ")]
        assert "its process is gone" in row, row


def test_every_message_the_recorder_counted_is_in_its_file(run: Run) -> None:
    counted = run.closing.removeprefix("distmon record: ").split(",")[0]  # "N messages from R ranks"
    assert counted == f"{len(run.reports)} messages from {RANKS} ranks", run.closing
    assert run.text.splitlines()[1].split(";")[0] == f"{len(run.reports)} messages"


def test_every_rank_is_in_the_file_and_the_culprit_s_last_words_too(run: Run) -> None:
    """The job lived a second or two after attach: each rank's first report, made then, is in
    the file; the rank that raised said why before it went."""
    assert {r.rank for r in run.reports} == set(range(RANKS))
    if run.fault != "sigkill":
        assert any(r.rank == CULPRIT and r.exception is not None for r in run.reports)
