"""A hung job's end: how long from the fault to the job's exit, torch alone against
``distmon run --abort-on-hang``. 4 gloo ranks under torchrun, rank 2 stops before a
collective (``examples/train.py --fault hang``).

    .venv/bin/python benchmarks/bench_abort.py [--runs 3] [--timeout 120] [--abort-on-hang 10]

Torch alone ends the job when the collective timeout fires (``--timeout``; gloo's default
is 30 min, NCCL's 10 min). Under distmon the job ends ``--abort-on-hang`` seconds after the
hang alert, plus the time to detect the hang and to take the evidence. Prints a markdown
table: median and worst time from the fault to the job's exit, and the exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
INJECTED = re.compile(r"\[train\] rank \d+: injecting hang at step \d+, t=([\d.]+)")


def one_run(timeout: float, abort_after: float | None, folder: Path) -> tuple[float, int]:
    """Seconds from the fault to the job's exit, and the exit status."""
    job = [TORCHRUN, "--standalone", "--nproc_per_node=4", str(REPO / "examples" / "train.py")]
    job += ["--fault", "hang", "--fault-rank", "2", "--timeout", str(timeout)]
    if abort_after is not None:
        record = ["--record", str(folder / "run.distmon"), "--abort-on-hang", str(abort_after)]
        job = [sys.executable, "-m", "distmon", "run", *record, "--", *job]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(job, env=env, capture_output=True, text=True, timeout=timeout * 3 + 120)
    ended = time.time()
    found = INJECTED.search(done.stdout)
    if found is None:
        raise SystemExit(f"the fault was never injected:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return ended - float(found.group(1)), done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="the job's collective timeout, seconds")
    parser.add_argument("--abort-on-hang", type=float, default=10.0)
    args = parser.parse_args()
    rows = []
    for name, abort_after in (
        ("torch alone", None),
        (f"distmon run --abort-on-hang {args.abort_on_hang:g}", args.abort_on_hang),
    ):
        times, statuses = [], set()
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                seconds, status = one_run(args.timeout, abort_after, Path(folder))
            times.append(seconds)
            statuses.add(status)
            print(f"{name}: {seconds:.1f} s, status {status}", file=sys.stderr)
        rows.append((name, statistics.median(times), max(times), sorted(statuses)))
    print(f"\nCollective timeout {args.timeout:g} s, {args.runs} runs each.\n")
    print("| setup | fault to job end, median | worst | exit status |")
    print("|---|---:|---:|---|")
    for name, median, worst, statuses in rows:
        print(f"| {name} | {median:.1f} s | {worst:.1f} s | {', '.join(map(str, statuses))} |")


if __name__ == "__main__":
    main()
