"""The README's demo: a 4-rank gloo job with distmon attached, a fault injected after a few
seconds, and the monitor showing it.

In a terminal the monitor is ``distmon watch`` (quit with q, which also stops the job);
without one (a CI log, a pipe) it is ``distmon record`` printing alert lines, followed by
``distmon report``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAULTS = ("hang", "extra-collective", "uneven", "exception", "sigkill", "worker-kill", "gil", "straggler", "leak")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=FAULTS, default="hang", help="what goes wrong (default: hang)")
    parser.add_argument("--rank", type=int, default=2, help="on which of the 4 ranks (default: 2)")
    parser.add_argument("--headless", action="store_true", help="record and report instead of the TUI")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="distmon-demo-"))
    endpoint = f"ipc://{workdir}/monitor.sock"
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    distmon = [sys.executable, "-m", "distmon"]
    headless = args.headless or not sys.stdout.isatty()
    recording = workdir / "demo.distmon"
    monitor = subprocess.Popen(
        [*distmon, "record", "--out", str(recording)] if headless else [*distmon, "watch"], env=env
    )
    time.sleep(1.0)
    log = workdir / "job.log"
    print(f"demo: 4 ranks, {args.fault} on rank {args.rank} after 60 steps; job output in {log}", flush=True)
    with log.open("w") as out:
        job = subprocess.Popen(
            [
                *(sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"),
                *(str(REPO / "examples" / "train.py"), "--distmon", "--steps", "600", "--step-time", "0.05"),
                *("--fault", args.fault, "--fault-rank", str(args.rank), "--fault-step", "60", "--timeout", "300"),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            if headless:
                _wait(job, monitor, seconds=60)
            else:
                monitor.wait()
        finally:
            _stop(job)
            if monitor.poll() is None:
                monitor.send_signal(signal.SIGINT)
                monitor.wait()
    if headless:
        subprocess.run([*distmon, "report", str(recording)], check=False)
    return 0


def _wait(job: subprocess.Popen, monitor: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and job.poll() is None and monitor.poll() is None:
        time.sleep(0.5)


def _stop(job: subprocess.Popen) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


if __name__ == "__main__":
    sys.exit(main())
