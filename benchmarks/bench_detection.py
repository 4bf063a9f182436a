"""Detection latency on real jobs: 4 gloo ranks under torchrun, a fault injected on rank 2,
a real `distmon record` listening. Latency = the alert's time minus the injection's.

    .venv/bin/python benchmarks/bench_detection.py [--runs 3] [--faults hang sigkill ...]

Prints a markdown table: median and worst latency per scenario, whether every run named the
right kind and ranks, and whether the alert's evidence carried the user's frame where the
rank is stuck (read 3 s after the alert: a stack taken from outside comes in an update).

``late-init`` runs the unmodified script under ``distmon run`` (the hook must be there before
``init_process_group``); ``loader-block`` measures from the moment the worker blocks, which
prefetching puts a little before the training loop waits for that batch.

``slow-every-step`` is a job of 12.5 ms steps whose rank 2 sleeps 50 ms in every step from
step 40 (the job's steps take 60 ms): a straggler, timed from step 40, not a routine pause.

``messy`` is a healthy job with the habits of real ones (rank 0 uploads its metrics to a slow
service every 25 steps, evaluates alone every 40, writes a checkpoint every 60, its first step
takes 6 s where the others take 2; rank 2 holds the GIL 1.5 s every 30 steps): every alert
naming a rank counts against it, warnings included. ``stuck-upload`` is the same job whose
upload at step 150 never returns: timed from that upload's start, rank 0 alone expected.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Scenario:
    kind: str
    """The alert expected."""
    fault: str
    args: tuple[str, ...] = ()
    ranks: tuple[int, ...] = (2,)
    frame: str | None = None
    """Text of the user's frame the evidence must show, where it is the point."""
    unmodified: bool = False
    """Run under ``distmon run`` instead of with ``--distmon``."""
    healthy: bool = False
    """A job that must raise no alert naming a rank (but a warning naming the rank that holds
    the others up and saying what it does): run to its end, its false alarms counted."""
    jobs: int = 1
    """Healthy jobs run at once on the machine, each with its own recorder."""
    strict: bool = False
    """For a healthy job: every alert naming a rank is a false alarm, a warning saying what
    the rank does included."""


HABITS = (
    *("--habit", "upload@25:0:3", "--habit", "evaluate@40:0:2", "--habit", "gc@30:2:1.5"),
    *("--habit", "checkpoint@60:0:4", "--fault", "slow-import@0:0:6", "--fault", "slow-import@0:-1:2"),
)
"""What a healthy job does again and again (``examples/train.py --habit``)."""


SCENARIOS = {
    "hang": Scenario("hang", "hang"),
    "extra-collective": Scenario("divergence", "extra-collective"),
    "uneven": Scenario("divergence", "uneven"),
    "exception": Scenario("rank_exception", "exception"),
    "sigkill": Scenario("rank_lost", "sigkill"),
    "worker-kill": Scenario("worker_crash", "worker-kill"),
    "gil": Scenario("hang", "gil", frame="ctypes.PyDLL(None).sleep"),
    "stop": Scenario("hang", "stop"),
    "fifo-save": Scenario("hang", "fifo-save"),
    "straggler": Scenario("straggler", "straggler"),
    "slow-every-step": Scenario("straggler", "straggler@40:2:600", ("--step-time", "0.0125")),
    "leak": Scenario("memory_pressure", "leak"),
    "late-init": Scenario("stall", "late-init", frame="time.sleep(fault.seconds)", unmodified=True),
    "loader-block": Scenario("hang", "loader-block", frame="Noise.__getitem__"),
    "loader-block-all": Scenario(
        "stall", "loader-block", ("--fault-rank", "-1"), ranks=(0, 1, 2, 3), frame="Noise.__getitem__"
    ),
    "healthy": Scenario("", "none", ("--steps", "300"), healthy=True),
    "checkpoint": Scenario("", "checkpoint@60:2:8", ("--steps", "300"), healthy=True),
    "slow-first-step": Scenario("", "slow-import@1:2:8", ("--steps", "300"), healthy=True),
    "two-jobs": Scenario("", "none", ("--steps", "300"), healthy=True, jobs=2),
    "regex": Scenario("hang", "regex", frame="hold_the_gil"),
    "messy": Scenario("", "none", ("--steps", "400", *HABITS), healthy=True, strict=True),
    "stuck-upload": Scenario("hang", "upload-hang@150:0:600", HABITS, ranks=(0,), frame="upload_metrics"),
}
INJECTED = r"injecting {kind}\S* at step \d+, t=([\d.]+)"
"""The line a fault prints when injected (``loader-block`` adds its worker)."""
SETTLE = 3.0


def run_healthy(name: str, workdir: Path) -> tuple[int, list[str]]:
    """A healthy job (or ``jobs`` at once) run to its end: the alerts naming a rank but a
    warning naming the one rank that holds the others up and saying what it does ("rank 2 is
    writing a checkpoint", "rank 0 is short of CPU"), and every alert's line."""
    scenario = SCENARIOS[name]
    started = []
    for i in range(scenario.jobs):
        endpoint = f"ipc://{workdir}/{name}-{i}.sock"
        out = workdir / f"{name}-{i}.distmon"
        env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        log = (workdir / f"{name}-{i}.record.log").open("w+")
        recorder = subprocess.Popen([sys.executable, "-m", "distmon", "record", "--out", str(out)], env=env, stderr=log)
        started.append((recorder, out, env))
    time.sleep(1.0)
    jobs = [
        subprocess.Popen([*_train(scenario), "--distmon"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        for _, _, env in started
    ]
    for job in jobs:
        job.wait(300)
    false_alarms, said = 0, []
    for recorder, out, _ in started:
        time.sleep(2.0)  # the ranks' last words
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
        report = subprocess.run(
            [sys.executable, "-m", "distmon", "report", str(out), "--json"], capture_output=True, text=True, check=True
        )
        for alert in json.loads(report.stdout):
            said.append(f"{alert['severity']} {alert['kind']}: {alert['summary']}")
            ranks = alert["ranks"]
            says = len(ranks) == 1 and alert["summary"].startswith(f"rank {ranks[0]} is ")
            excused = not scenario.strict and alert["severity"] == "warning" and says
            false_alarms += bool(ranks) and not excused
    return false_alarms, said


def _train(scenario: Scenario) -> list[str]:
    fault = scenario.fault.split("@")
    where = ("--fault", scenario.fault) if len(fault) > 1 else ("--fault", scenario.fault, "--fault-rank", "2")
    return [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"),
        *(str(REPO / "examples" / "train.py"), "--steps", "800", *where),
        *("--fault-step", "20", "--timeout", "120", *scenario.args),
    ]


def run_once(name: str, workdir: Path) -> tuple[float | None, bool, bool | None]:
    """(latency in seconds or None if missed, whether the alert named the right ranks, whether
    its evidence showed the frame, None where that is not asked)."""
    scenario = SCENARIOS[name]
    endpoint = f"ipc://{workdir}/{name}.sock"
    out = workdir / f"{name}.distmon"
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    log = (workdir / f"{name}.record.log").open("w+")
    train = _train(scenario)
    recorder = None
    output_file = workdir / f"{name}.job.log"
    with output_file.open("w") as job_output:
        if scenario.unmodified:
            command = [sys.executable, "-m", "distmon", "run", "--record", str(out), "--", *train]
            job = subprocess.Popen(command, env=env, stdout=job_output, stderr=log, start_new_session=True)
        else:
            recorder = subprocess.Popen(
                [sys.executable, "-m", "distmon", "record", "--out", str(out)], env=env, stderr=log
            )
            time.sleep(1.0)
            job = subprocess.Popen(
                [*train, "--distmon"], env=env, stdout=job_output, stderr=subprocess.STDOUT, start_new_session=True
            )
    _await_alert(scenario, Path(log.name), output_file)
    time.sleep(SETTLE)
    family = psutil.Process(job.pid).children(recursive=True)
    for process in family:  # a stopped rank would not end
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGCONT)
    os.killpg(job.pid, signal.SIGTERM)
    job.wait(60)
    for process in family:  # a fault's helper (`sleep; kill -CONT`) holds the job's output open
        with contextlib.suppress(psutil.Error):
            process.kill()
    output = output_file.read_text()
    if recorder is not None:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    report = subprocess.run(
        [sys.executable, "-m", "distmon", "report", str(out), "--json"], capture_output=True, text=True, check=True
    )
    injected = re.search(INJECTED.format(kind=re.escape(scenario.fault.split("@")[0])), output)
    since = float(injected.group(1)) if injected and name != "straggler" else 0.0
    alerts = [a for a in json.loads(report.stdout) if a["kind"] == scenario.kind and a["t"] >= since]
    if not alerts:
        return None, False, None
    alert = alerts[0]
    right = alert["ranks"] == list(scenario.ranks)
    if not right:
        print(f"  {name}: named {alert['ranks']}: {alert['summary']}", file=sys.stderr)
    start = float(injected.group(1)) if injected and name != "straggler" else _job_start(out)
    framed = None if scenario.frame is None else scenario.frame in alert["detail"]
    return alert["t"] - start, right, framed


def _await_alert(scenario: Scenario, log: Path, output: Path, timeout: float = 90) -> None:
    """Until the recorder's log shows an alert of the kind expected raised after the fault was
    injected (a job's habits may have raised one before), or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    injected = re.compile(INJECTED.format(kind=re.escape(scenario.fault.split("@")[0])))
    raised = re.compile(rf" (WARNING|CRITICAL) {scenario.kind}: ")
    before = None
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines()
        if before is None and injected.search(output.read_text()):
            before = len(lines)
        if before is not None and any(raised.search(line) for line in lines[before:]):
            return
        time.sleep(0.2)


def _job_start(recording: Path) -> float:
    """A straggler is slow from the first step: measure from the first report."""
    from distmon.monitor.recording.readback import load_recording

    return load_recording(str(recording)).first or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = parser.parse_args()
    print("| fault | alert | median s | worst s | right rank | frame in evidence | missed |")
    print("|---|---|---:|---:|---|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for fault in args.faults:  # a healthy job's last column: its false alarms over every run
            if SCENARIOS[fault].healthy:
                counted = [run_healthy(fault, Path(tmp)) for _ in range(args.runs)]
                said = sorted({line for _, lines in counted for line in lines})
                print(f"| {fault} (healthy) | none naming a rank | - | - | - | - | {sum(n for n, _ in counted)} |")
                for line in said:
                    print(f"|   said: {line[:150]} | | | | | | |", flush=True)
                continue
            results = [run_once(fault, Path(tmp)) for _ in range(args.runs)]
            found = [(lat, ok, framed) for lat, ok, framed in results if lat is not None]
            latencies = [lat for lat, _, _ in found]
            right = all(ok for _, ok, _ in found)
            framed = [f for _, _, f in found if f is not None]
            frame = "-" if not framed else ("yes" if all(framed) else f"{sum(framed)}/{len(framed)}")
            missed = len(results) - len(found)
            median = f"{statistics.median(latencies):.1f}" if latencies else "-"
            worst = f"{max(latencies):.1f}" if latencies else "-"
            kind = SCENARIOS[fault].kind
            print(
                f"| {fault} | {kind} | {median} | {worst} | {'yes' if right else 'NO'} | {frame} | {missed} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
