"""Detection latency on real jobs: 4 gloo ranks under torchrun, a fault injected on rank 2,
a real `distmon record` listening. Latency = the alert's time minus the injection's.

    .venv/bin/python benchmarks/bench_detection.py [--runs 3] [--faults hang sigkill ...]

Prints a markdown table: median and worst latency per scenario, whether every run named the
right kind and ranks, and whether the alert's evidence carried the user's frame where the
rank is stuck (read 3 s after the alert: a stack taken from outside comes in an update).

``late-init`` runs the unmodified script under ``distmon run`` (the hook must be there before
``init_process_group``); ``loader-block`` measures from the moment the worker blocks, which
prefetching puts a little before the training loop waits for that batch.
"""

from __future__ import annotations

import argparse
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


SCENARIOS = {
    "hang": Scenario("hang", "hang"),
    "extra-collective": Scenario("divergence", "extra-collective"),
    "uneven": Scenario("divergence", "uneven"),
    "exception": Scenario("rank_exception", "exception"),
    "sigkill": Scenario("rank_lost", "sigkill"),
    "worker-kill": Scenario("worker_crash", "worker-kill"),
    "gil": Scenario("rank_lost", "gil", frame="ctypes.PyDLL(None).sleep"),
    "straggler": Scenario("straggler", "straggler"),
    "leak": Scenario("memory_pressure", "leak"),
    "late-init": Scenario("stall", "late-init", frame="time.sleep(args.hang_seconds)", unmodified=True),
    "loader-block": Scenario("hang", "loader-block", frame="Noise.__getitem__"),
    "loader-block-all": Scenario(
        "stall", "loader-block", ("--fault-rank", "-1"), ranks=(0, 1, 2, 3), frame="Noise.__getitem__"
    ),
}
INJECTED = re.compile(r"injecting \S+ at step \d+, t=([\d.]+)")
SETTLE = 3.0


def run_once(name: str, workdir: Path) -> tuple[float | None, bool, bool | None]:
    """(latency in seconds or None if missed, whether the alert named the right ranks, whether
    its evidence showed the frame, None where that is not asked)."""
    scenario = SCENARIOS[name]
    endpoint = f"ipc://{workdir}/{name}.sock"
    out = workdir / f"{name}.distmon"
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    log = (workdir / f"{name}.record.log").open("w+")
    train = [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"),
        *(str(REPO / "examples" / "train.py"), "--steps", "800", "--fault", scenario.fault),
        *("--fault-rank", "2", "--fault-step", "20", "--timeout", "120", *scenario.args),
    ]
    recorder = None
    if scenario.unmodified:
        command = [sys.executable, "-m", "distmon", "run", "--record", str(out), "--", *train]
        job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    else:
        recorder = subprocess.Popen([sys.executable, "-m", "distmon", "record", "--out", str(out)], env=env, stderr=log)
        time.sleep(1.0)
        job = subprocess.Popen(
            [*train, "--distmon"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and f" {scenario.kind}: " not in Path(log.name).read_text():
        time.sleep(0.2)
    time.sleep(SETTLE)
    os.killpg(job.pid, signal.SIGTERM)
    output, _ = job.communicate(timeout=60)
    if recorder is not None:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    report = subprocess.run(
        [sys.executable, "-m", "distmon", "report", str(out), "--json"], capture_output=True, text=True, check=True
    )
    alerts = [a for a in json.loads(report.stdout) if a["kind"] == scenario.kind]
    injected = INJECTED.search(output)
    if not alerts:
        return None, False, None
    alert = alerts[0]
    right = alert["ranks"] == list(scenario.ranks)
    if not right:
        print(f"  {name}: named {alert['ranks']}: {alert['summary']}", file=sys.stderr)
    start = float(injected.group(1)) if injected and name != "straggler" else _job_start(out)
    framed = None if scenario.frame is None else scenario.frame in alert["detail"]
    return alert["t"] - start, right, framed


def _job_start(recording: Path) -> float:
    """A straggler is slow from the first step: measure from the first report."""
    from distmon.monitor.postmortem import load

    return load(str(recording)).first or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = parser.parse_args()
    print("| fault | alert | median s | worst s | right rank | frame in evidence | missed |")
    print("|---|---|---:|---:|---|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for fault in args.faults:
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
