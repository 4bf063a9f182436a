"""Detection latency on real jobs: 4 gloo ranks under torchrun, a fault injected on rank 2,
a real `distmon record` listening. Latency = the alert's time minus the injection's.

    .venv/bin/python benchmarks/bench_detection.py [--runs 3] [--faults hang sigkill ...]

Prints a markdown table: median and worst latency per scenario, and whether every run
named the right kind and rank.
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXPECTED = {
    "hang": "hang",
    "extra-collective": "divergence",
    "uneven": "divergence",
    "exception": "rank_exception",
    "sigkill": "rank_lost",
    "worker-kill": "worker_crash",
    "gil": "rank_lost",
    "straggler": "straggler",
    "leak": "memory_pressure",
}
INJECTED = re.compile(r"injecting \S+ at step \d+, t=([\d.]+)")


def run_once(fault: str, workdir: Path) -> tuple[float | None, bool]:
    """(latency in seconds or None if missed, whether the alert named rank 2)."""
    endpoint = f"ipc://{workdir}/{fault}.sock"
    out = workdir / f"{fault}.distmon"
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    log = (workdir / f"{fault}.record.log").open("w+")
    recorder = subprocess.Popen([sys.executable, "-m", "distmon", "record", "--out", str(out)], env=env, stderr=log)
    time.sleep(1.0)
    job = subprocess.Popen(
        [
            *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"),
            *(str(REPO / "examples" / "train.py"), "--distmon", "--steps", "800", "--fault", fault),
            *("--fault-rank", "2", "--fault-step", "20", "--timeout", "120"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and f" {EXPECTED[fault]}: " not in Path(log.name).read_text():
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGTERM)
    output, _ = job.communicate(timeout=60)
    recorder.send_signal(signal.SIGINT)
    recorder.wait(30)
    report = subprocess.run(
        [sys.executable, "-m", "distmon", "report", str(out), "--json"], capture_output=True, text=True, check=True
    )
    alerts = [a for a in json.loads(report.stdout) if a["kind"] == EXPECTED[fault]]
    injected = INJECTED.search(output)
    if not alerts:
        return None, False
    if alerts[0]["ranks"] != [2]:
        print(f"  {fault}: named {alerts[0]['ranks']}: {alerts[0]['summary']}", file=sys.stderr)
    start = float(injected.group(1)) if injected and fault != "straggler" else _job_start(out)
    return alerts[0]["t"] - start, alerts[0]["ranks"] == [2]


def _job_start(recording: Path) -> float:
    """A straggler is slow from the first step: measure from the first report."""
    from distmon.monitor.postmortem import load

    return load(str(recording)).first or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", default=list(EXPECTED), choices=list(EXPECTED))
    args = parser.parse_args()
    print("| fault | alert | median s | worst s | right rank | missed |")
    print("|---|---|---:|---:|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for fault in args.faults:
            results = [run_once(fault, Path(tmp)) for _ in range(args.runs)]
            latencies = [lat for lat, _ in results if lat is not None]
            right = all(ok for lat, ok in results if lat is not None)
            missed = sum(lat is None for lat, _ in results)
            median = f"{statistics.median(latencies):.1f}" if latencies else "-"
            worst = f"{max(latencies):.1f}" if latencies else "-"
            print(
                f"| {fault} | {EXPECTED[fault]} | {median} | {worst} | {'yes' if right else 'NO'} | {missed} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
