"""A rank on another node, seen by that node's eye: how soon it is named, in which words, and
what the eye costs its node.

    .venv/bin/python benchmarks/bench_nodes.py [--runs 3] [--faults hang stop regex] [--no-ptrace]

Two nodes over network namespaces (root; ``tests/support/nodes.py``), each its own address
and host name, two gloo ranks on each under torchrun, a ``distmon relay`` per node (with
``--no-ptrace``, node B's without CAP_SYS_PTRACE), ``distmon record`` on the head, outside
both. The fault comes on rank 3, on node B, at step 60. Latency = the first alert naming a rank
minus the job's own line saying it injected the fault. Prints a markdown table: median and
worst latency, whether every run named rank 3 alone, the summary's first words, whether the
evidence held a stack showing the training script; then what node B's relay used: its CPU
over the run, and the bytes of looks it sent (the recording's ``o`` records).
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

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from distmon.monitor.recording.format import AlertEvent, LooksRecord  # noqa: E402
from distmon.monitor.recording.reader import read_recording  # noqa: E402
from tests.support.commands import DISTMON, TORCHRUN, free_port  # noqa: E402
from tests.support.nodes import nodes  # noqa: E402
from tests.support.paths import TRAIN  # noqa: E402

SECONDS = {"hang": 8, "stop": 8, "regex": 8}
"""How long each fault lasts: the job goes on after it."""


def run_once(fault: str, workdir: Path, no_ptrace: bool) -> dict[str, object]:
    out = workdir / "job.distmon"
    rdzv, port = free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []
    with nodes(["node-a", "node-b"]) as (head, made):
        upstream = f"tcp://{head}:{port}"
        recorder = subprocess.Popen([*DISTMON, "record", "--out", str(out), "--endpoint", upstream],
                                    stderr=(workdir / "record.log").open("w"))  # fmt: skip
        time.sleep(2)
        relay_b: psutil.Process | None = None
        try:
            for k, node in enumerate(made):
                listen = f"tcp://127.0.0.1:{7200 + k}"
                relay = [*DISTMON, "relay", "--listen", listen, "--upstream", upstream]
                if no_ptrace and node.name == "node-b":
                    relay = ["capsh", "--drop=cap_sys_ptrace", "--", "-c", " ".join(relay)]
                started.append(subprocess.Popen(node.command(relay), stderr=subprocess.DEVNULL, start_new_session=True))
                if node.name == "node-b":
                    relay_b = psutil.Process(started[-1].pid)
                train = [str(TRAIN), "--distmon", "--workers", "0", "--timeout", "120", "--steps", "200"]
                train += ["--step-time", "0.05", "--fault", f"{fault}@60:3:{SECONDS[fault]}"]
                launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                launcher += ["--rdzv-id", "bench", "--local-addr", node.address]
                env = {**os.environ, "DISTMON_ENDPOINT": listen, "GLOO_SOCKET_IFNAME": node.inside,
                       "DISTMON_INTERVAL": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}  # fmt: skip
                log = (workdir / f"job-{node.name}.log").open("w")
                started.append(subprocess.Popen(node.command([*launcher, *train]), env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
            begun = time.time()
            for process in started[1::2]:
                process.wait(180)
            cpu = _cpu(relay_b)
            wall = time.time() - begun
        finally:
            for process in started:
                _end(process)
            recorder.send_signal(signal.SIGINT)
            recorder.wait(30)
    return _measure(fault, workdir, out, cpu, wall)


def _cpu(process: psutil.Process | None) -> float:
    if process is None:
        return 0.0
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            times = p.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def _end(process: subprocess.Popen[bytes]) -> None:
    try:
        for child in psutil.Process(process.pid).children(recursive=True):
            child.send_signal(signal.SIGCONT)
            child.kill()
    except psutil.Error:
        pass
    process.kill()
    process.wait()


def _measure(fault: str, workdir: Path, out: Path, cpu: float, wall: float) -> dict[str, object]:
    text = (workdir / "job-node-b.log").read_text()
    injected = re.search(rf"injecting {fault} at step \d+, t=([\d.]+)", text)
    _, records = read_recording(str(out))
    records = list(records)
    raised = [r for r in records if isinstance(r, AlertEvent) and r.event == "raised"]
    alert = next((r for r in raised if injected and r.t >= float(injected.group(1)) - 1 and r.alert.ranks), None)
    looks_bytes = sum(len(r.looks) for r in records if isinstance(r, LooksRecord))
    details = [
        r.alert.detail for r in records if isinstance(r, AlertEvent) and alert and r.alert.key == alert.alert.key
    ]
    return {
        "fault": fault,
        "latency": None if alert is None or injected is None else alert.t - float(injected.group(1)),
        "ranks": alert.alert.ranks if alert else None,
        "words": alert.alert.summary.split(";")[0] if alert else None,
        "stack": any("train.py" in d and ("py-spy" in d or "faulthandler" in d) for d in details),
        "relay_cpu_share": cpu / wall if wall else None,
        "looks_bytes": looks_bytes,
        "seconds": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", default=["hang", "stop", "regex"], choices=sorted(SECONDS))
    parser.add_argument("--no-ptrace", action="store_true", help="node B's relay without CAP_SYS_PTRACE")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for fault in args.faults:
        runs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp:
                runs.append(run_once(fault, Path(tmp), args.no_ptrace))
            print(json.dumps(runs[-1]), file=sys.stderr)
        rows.append((fault, runs))
    print(f"load {os.getloadavg()[0]:.1f}; node B's relay {'without' if args.no_ptrace else 'with'} CAP_SYS_PTRACE")
    print("| fault | median s | worst s | rank 3 alone | first words | stack | relay CPU | looks bytes/s |")
    print("|---|---:|---:|---|---|---|---:|---:|")
    for fault, runs in rows:
        times = [r["latency"] for r in runs if isinstance(r["latency"], float)]
        median = f"{statistics.median(times):.1f}" if times else "-"
        worst = f"{max(times):.1f}" if len(times) == len(runs) else "missed"
        alone = all(r["ranks"] == [3] for r in runs)
        words = "; ".join(sorted({str(r["words"]) for r in runs}))
        stack = sum(bool(r["stack"]) for r in runs)
        cpu = statistics.median(float(r["relay_cpu_share"] or 0) for r in runs)
        rate = statistics.median(int(r["looks_bytes"]) / float(r["seconds"]) for r in runs)  # type: ignore[call-overload, arg-type]
        print(f"| {fault} | {median} | {worst} | {alone} | {words} | {stack}/{len(runs)} | {cpu:.1%} | {rate:.0f} |")


if __name__ == "__main__":
    main()
