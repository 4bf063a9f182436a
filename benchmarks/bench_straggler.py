"""A rank slower than its peers, and healthy jobs that must never have one: how soon the
straggler is named against how much slower it is, and how often a healthy job gets one, on an
idle machine and beside two CPU burners.

    .venv/bin/python benchmarks/bench_straggler.py [--runs 3] [--slowdowns 5 10 20 50]
        [--minutes 5] [--jobs paced messy] [--loads idle burners] [--step-time 0.05]

Real 4-rank gloo jobs under torchrun (``examples/train.py``, every rank paced 50 ms a step by a
sleep, or ``--step-time``), a real ``distmon record`` listening. Slowdowns: rank 2's sleep made 5%, 10%, 20% or 50%
longer from step 150 (``--fault straggler@150:2:... --straggler-factor``), timed from the line
the rank prints then to the first straggler alert; a run that names another rank first, or
none within its limit (4 minutes at 5%, 2 otherwise), is missed. The table gives the median and
worst, whether every alert named rank 2 alone, the cost the alert said once settled, and the
cost measured: the job's steps per second before the slowdown against after it.

Healthy jobs, run ``--minutes`` each: ``paced`` (nothing but the pace) and ``messy`` (the
habits of real jobs: rank 0 uploads its metrics to a slow service every 25 steps for 3 s,
evaluates alone every 40, writes a checkpoint every 60; rank 2 holds the GIL 1.5 s every 30
steps; rank 0's first step takes 6 s where the others take 2), each on the machine as it is
(``idle``) and beside two processes spinning on the CPUs (``burners``: ``sh -c 'while :; do
:; done'``). Every straggler alert is false; per hour of the job.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from distmon.monitor.recording.format import received  # noqa: E402
from distmon.monitor.recording.reader import read_recording  # noqa: E402
from distmon.wire import decode  # noqa: E402
from tests.support.commands import DISTMON, TORCHRUN  # noqa: E402
from tests.support.paths import TRAIN  # noqa: E402

STEPS = 20_000
"""More than a run takes (a job ends when stopped): the sampler's list of indices grows with it."""
SLOW_FROM = 150
INJECTED = re.compile(r"injecting straggler at step \d+, t=([\d.]+)")
COST = re.compile(r"the job steps (\d+)% slower")
HABITS = (
    *("--habit", "upload@25:0:3", "--habit", "evaluate@40:0:2", "--habit", "gc@30:2:1.5"),
    *("--habit", "checkpoint@60:0:4", "--fault", "slow-import@0:0:6", "--fault", "slow-import@0:-1:2"),
)
"""What a healthy job does again and again (``examples/train.py --habit``), as ``bench_detection.py``'s messy job."""


@dataclass
class Run:
    """A job under ``distmon record``: its recording, the recorder's log and the job's output."""

    recording: Path
    log: Path
    output: Path
    job: subprocess.Popen[bytes]
    recorder: subprocess.Popen[bytes]

    def said(self, pattern: str) -> bool:
        return re.search(pattern, self.log.read_text()) is not None

    def stop(self) -> list[dict[str, object]]:
        """End the job and the recorder; the alerts recorded."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.job.pid, signal.SIGTERM)
        self.job.wait(60)
        self.recorder.send_signal(signal.SIGINT)
        self.recorder.wait(60)
        report = subprocess.run(
            [*DISTMON, "report", str(self.recording), "--json"], capture_output=True, text=True, check=True
        )
        alerts: list[dict[str, object]] = json.loads(report.stdout)
        return alerts


@contextlib.contextmanager
def job(workdir: Path, name: str, step: float, *args: str) -> Iterator[Run]:
    endpoint = f"ipc://{workdir}/{name}.sock"
    out, log, output = workdir / f"{name}.distmon", workdir / f"{name}.record.log", workdir / f"{name}.job.log"
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as err:
        recorder = subprocess.Popen([*DISTMON, "record", "--out", str(out)], env=env, stderr=err)
    time.sleep(1.0)
    train = [TORCHRUN, "--standalone", "--nproc_per_node=4", str(TRAIN), "--distmon", "--steps", str(STEPS)]
    with output.open("w") as printed:
        started = subprocess.Popen(
            [*train, "--step-time", str(step), "--timeout", "120", *args],
            env=env,
            stdout=printed,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = Run(out, log, output, started, recorder)
    try:
        yield run
    finally:
        if run.job.poll() is None:
            run.stop()


@contextlib.contextmanager
def burners(load: str) -> Iterator[None]:
    """Two processes spinning on the CPUs for ``burners``, none for ``idle``."""
    spinning = [
        subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(2 if load == "burners" else 0)
    ]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def slowed(percent: int, step: float, workdir: Path) -> tuple[float | None, bool, int | None, float | None]:
    """(seconds from the slowdown to the straggler named, or None if missed; whether it named
    rank 2 alone; the cost it said once settled, in percent; the cost measured, in percent)."""
    factor = 1 + percent / 100
    limit = 240 if percent < 10 else 120
    name = f"slow{percent}"
    slow = ("--fault", f"straggler@{SLOW_FROM}:2:100000", "--straggler-factor", str(factor))
    with job(workdir, name, step, *slow) as run:
        deadline = time.monotonic() + limit + 60
        while time.monotonic() < deadline and not INJECTED.search(run.output.read_text()):
            time.sleep(0.5)
        injected = INJECTED.search(run.output.read_text())
        since = time.monotonic()
        while time.monotonic() - since < limit and not run.said(r" WARNING straggler: "):
            time.sleep(0.5)
        if run.said(r" WARNING straggler: "):
            time.sleep(30)  # the cost it says settles as the slow steps outweigh those before
        alerts = run.stop()
    if injected is None:
        return None, False, None, None
    at = float(injected.group(1))
    stragglers = [a for a in alerts if a["kind"] == "straggler"]
    measured = _measured_cost(run.recording, at)
    if not stragglers:
        return None, False, None, measured
    first = stragglers[0]
    said = COST.search(str(first["summary"]))
    named = float(str(first["t"])) - at
    right = first["ranks"] == [2] and len(stragglers) == 1
    if not right:
        print(f"  {name}: {[(a['ranks'], a['summary']) for a in stragglers]}", file=sys.stderr)
    return (named if named <= limit else None), right, int(said.group(1)) if said else None, measured


def _measured_cost(recording: Path, at: float) -> float | None:
    """How much slower the job stepped after ``at`` than before: rank 0's steps a second over
    the 10 s before, against those from 10 s after on (percent)."""
    _, records = read_recording(str(recording))
    marks = [(r.t, r.steps) for r in (decode(frame) for _, frame in received(records)) if r.rank == 0 and r.steps]
    before = [(t, s) for t, s in marks if at - 10 <= t <= at]
    after = [(t, s) for t, s in marks if t >= at + 10]
    if len(before) < 2 or len(after) < 2:
        return None
    rate = [(b[-1][1] - b[0][1]) / (b[-1][0] - b[0][0]) for b in (before, after)]
    return 100 * (rate[0] / rate[1] - 1)


def healthy(kind: str, load: str, minutes: float, step: float, workdir: Path) -> tuple[int, float, list[str], float]:
    """A healthy job run ``minutes``: its false straggler alerts, the minutes it ran, every
    straggler alert's summary, and the machine's load at its end."""
    with burners(load), job(workdir, f"{kind}-{load}", step, *(HABITS if kind == "messy" else ())) as run:
        started = time.monotonic()
        time.sleep(minutes * 60)
        ran = (time.monotonic() - started) / 60
        loadavg = os.getloadavg()[0]
        ended = time.time()
        alerts = run.stop()
    stragglers = [a for a in alerts if a["kind"] == "straggler" and float(str(a["t"])) <= ended]
    return len(stragglers), ran, [str(a["summary"]) for a in stragglers], loadavg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slowdowns", type=int, nargs="*", default=[5, 10, 20, 50])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--jobs", nargs="*", default=["paced", "messy"], choices=["paced", "messy"])
    parser.add_argument("--loads", nargs="*", default=["idle", "burners"], choices=["idle", "burners"])
    parser.add_argument("--step-time", type=float, default=0.05, help="every rank's pace, seconds a step")
    args = parser.parse_args()
    step = args.step_time
    with tempfile.TemporaryDirectory(prefix="bench-straggler-") as tmp:
        workdir = Path(tmp)
        if args.slowdowns:
            print("| slower | named | median s | worst s | rank 2 alone | cost said | cost measured | load |")
            print("|---:|---:|---:|---:|---|---|---|---:|", flush=True)
        for percent in args.slowdowns:
            results = [slowed(percent, step, workdir) for _ in range(args.runs)]
            found = [r for r in results if r[0] is not None]
            times = [r[0] for r in found if r[0] is not None]
            said = [f"{r[2]}%" for r in found if r[2] is not None]
            measured = [f"{r[3]:.0f}%" for r in results if r[3] is not None]
            median, worst = (f"{statistics.median(times):.1f}", f"{max(times):.1f}") if times else ("-", "-")
            alone = "-" if not found else "yes" if all(r[1] for r in found) else "NO"
            print(
                f"| {percent}% | {len(found)} of {len(results)} | {median} | {worst} | {alone} | "
                f"{', '.join(said) or '-'} | {', '.join(measured) or '-'} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
        if args.jobs and args.loads:
            print()
            print("| healthy job | machine | minutes | false stragglers | per hour | load at the end |")
            print("|---|---|---:|---:|---:|---:|", flush=True)
        for load in args.loads:
            for kind in args.jobs:
                false, ran, summaries, loadavg = healthy(kind, load, args.minutes, step, workdir)
                print(f"| {kind} | {load} | {ran:.1f} | {false} | {60 * false / ran:.1f} | {loadavg:.1f} |", flush=True)
                for summary in summaries:
                    print(f"|   said: {summary[:150]} | | | | | |", flush=True)


if __name__ == "__main__":
    main()
