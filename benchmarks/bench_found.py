"""A job started without distmon, judged from outside: how soon each fault is named, and what
looking costs the job.

    .venv/bin/python benchmarks/bench_found.py [--runs 3] [--ranks 4 8] [--faults hang stop ...]
    .venv/bin/python benchmarks/bench_found.py --cost [--runs 3] [--ranks 4 8]

Each run starts ``examples/train.py`` under torchrun (gloo on CPU, no hook, no ``distmon run``)
and ``distmon record --find --pid`` beside it; a fault is injected on one rank. Latency = the
first alert naming the right rank (and kind) minus the injection's time, as the job printed it.
``healthy`` runs a job with the habits of real ones (an upload, an evaluation, a checkpoint, a
GC pause, each again and again) to its end: every alert naming a rank counts against it.

``--cost`` runs the same healthy job (no habit) alternately without and with ``record --find``
watching it: the job's wall time for its steps each way, and the monitor's CPU (its own and
the py-spy runs it started) per rank found and second.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TORCHRUN = str(Path(PYTHON).parent / "torchrun")


@dataclass(frozen=True)
class Scenario:
    kind: str
    fault: str
    rank: int = 2
    args: tuple[str, ...] = ()


SCENARIOS = {
    "hang": Scenario("hang", "hang"),
    "stop": Scenario("hang", "stop"),
    "regex": Scenario("hang", "regex"),
    "loader-block": Scenario("hang", "loader-block", args=("--workers", "2")),
    "extra-collective": Scenario("divergence", "extra-collective"),
}
HABITS = ("--habit", "upload@25:0:3", "--habit", "evaluate@40:0:2", "--habit", "gc@30:2:1.5",
          "--habit", "checkpoint@60:0:4")  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env or ENV, start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    for child in psutil.Process(process.pid).children(recursive=True):
        child.resume() if child.status() == psutil.STATUS_STOPPED else None
        child.kill()
    process.kill()
    process.wait()


def _alerts(recording: Path) -> list[dict]:
    done = subprocess.run([PYTHON, "-m", "distmon", "report", str(recording), "--json"], capture_output=True, text=True)
    return json.loads(done.stdout or "[]")


def _record(workdir: Path, job: subprocess.Popen[bytes]) -> tuple[subprocess.Popen[bytes], Path]:
    out = workdir / "found.distmon"
    argv = [PYTHON, "-m", "distmon", "record", "--find", "--pid", str(job.pid), "--out", str(out)]
    argv += ["--endpoint", f"ipc://{workdir}/found.sock"]
    return _start(argv, workdir / "record.log"), out


def run_fault(name: str, ranks: int, workdir: Path) -> tuple[float | None, bool]:
    """Seconds from the injection to the first alert naming the rank; whether it was the right one."""
    s = SCENARIOS[name]
    train = [str(REPO / "examples/train.py"), "--workers", "0", "--timeout", "120", "--steps", "400", *s.args]
    train += ["--fault", s.fault, "--fault-rank", str(s.rank), "--fault-step", "40", "--hang-seconds", "60"]
    log = workdir / "job.log"
    job = _start([TORCHRUN, f"--nproc-per-node={ranks}", *train], log)
    recorder, out = _record(workdir, job)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not re.search(r"injecting \S+ at step \d+, t=([\d.]+)", log.read_text()):
            time.sleep(0.5)
        found = re.search(r"injecting \S+ at step \d+, t=([\d.]+)", log.read_text())
        if found is None:
            return None, False
        t0 = float(found.group(1))
        time.sleep(15)
    finally:
        recorder.send_signal(2)
        recorder.wait(30)
        _stop(job)
    named = [a for a in _alerts(out) if a["ranks"] and a["t"] >= t0 - 1]
    if not named:
        return None, False
    first = named[0]
    return first["t"] - t0, first["kind"] == s.kind and first["ranks"] == [s.rank]


def run_healthy(ranks: int, workdir: Path) -> tuple[int, int, float]:
    """Critical alerts and warnings naming a rank over a healthy job with habits, and its seconds."""
    train = [str(REPO / "examples/train.py"), "--workers", "0", "--steps", "240", *HABITS]
    job = _start([TORCHRUN, f"--nproc-per-node={ranks}", *train], workdir / "job.log")
    recorder, out = _record(workdir, job)
    began = time.time()
    job.wait(600)
    took = time.time() - began
    time.sleep(8)
    recorder.send_signal(2)
    recorder.wait(30)
    named = [a for a in _alerts(out) if a["ranks"]]
    return sum(a["severity"] == "critical" for a in named), sum(a["severity"] == "warning" for a in named), took


def run_cost(ranks: int, watched: bool, workdir: Path) -> tuple[float, float | None]:
    """The job's wall time for its second epoch (its first includes start-up); the monitor's
    CPU per rank found, as a share of a core, where watched."""
    train = [str(REPO / "examples/train.py"), "--workers", "0", "--steps", "150", "--epochs", "2"]
    log = workdir / "job.log"
    job = _start([TORCHRUN, f"--nproc-per-node={ranks}", *train], log)
    recorder = _record(workdir, job)[0] if watched else None
    began = None
    while job.poll() is None and "epoch 1 done" not in log.read_text():
        if began is None and "epoch 0 done" in log.read_text():
            began = time.monotonic()
        time.sleep(0.05)
    took = time.monotonic() - (began or time.monotonic())
    job.wait(60)
    per_rank = None
    if recorder is not None:
        cpu = psutil.Process(recorder.pid).cpu_times()
        alive = time.time() - psutil.Process(recorder.pid).create_time()
        per_rank = (cpu.user + cpu.system + cpu.children_user + cpu.children_system) / alive / ranks
        recorder.send_signal(2)
        recorder.wait(30)
    return took, per_rank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[4])
    parser.add_argument("--faults", nargs="+", default=[*SCENARIOS, "healthy"])
    parser.add_argument("--cost", action="store_true")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f}")
    if args.cost:
        print("| ranks | an epoch, alone | an epoch, found and watched | monitor CPU per rank |")
        print("|---:|---:|---:|---:|")
        for ranks in args.ranks:
            bare, watched, cpu = [], [], []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as d:
                    bare.append(run_cost(ranks, False, Path(d))[0])
                with tempfile.TemporaryDirectory() as d:
                    took, per_rank = run_cost(ranks, True, Path(d))
                    watched.append(took)
                    cpu.append(per_rank or 0.0)
            print(f"| {ranks} | {statistics.median(bare):.1f} s | {statistics.median(watched):.1f} s | "
                  f"{100 * statistics.median(cpu):.1f}% of a core |")  # fmt: skip
        return
    print("| scenario | ranks | named | median | worst |")
    print("|---|---:|---:|---:|---:|")
    for ranks in args.ranks:
        for name in args.faults:
            if name == "healthy":
                results = []
                for _ in range(args.runs):
                    with tempfile.TemporaryDirectory() as d:
                        results.append(run_healthy(ranks, Path(d)))
                critical, warnings = sum(r[0] for r in results), sum(r[1] for r in results)
                minutes = sum(r[2] for r in results) / 60
                print(
                    f"| healthy (habits), {minutes:.0f} min | {ranks} | {critical} critical, {warnings} warnings | | |"
                )
                continue
            times, right = [], 0
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as d:
                    t, ok = run_fault(name, ranks, Path(d))
                if t is not None and ok:
                    times.append(t)
                    right += 1
            median = f"{statistics.median(times):.1f} s" if times else "-"
            worst = f"{max(times):.1f} s" if times else "-"
            print(f"| {name} | {ranks} | {right}/{args.runs} | {median} | {worst} |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
