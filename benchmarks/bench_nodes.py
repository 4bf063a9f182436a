"""A rank on another node, seen by that node's eye, and node B's faults as a whole: how soon each
is named, in which words, and what the eye costs its node.

    .venv/bin/python benchmarks/bench_nodes.py [--runs 3] [--faults hang stop regex] [--no-ptrace]
    .venv/bin/python benchmarks/bench_nodes.py [--runs 3] --faults sigkill relay flap [--keep DIR]

Two nodes over network namespaces (root; ``tests/support/nodes.py``), each its own address
and host name, two gloo ranks on each under torchrun, a ``distmon relay`` per node (with
``--no-ptrace``, node B's without CAP_SYS_PTRACE), ``distmon record`` on the head, outside
both. A fault of a rank comes on rank 3, on node B, at step 60. Latency = the first alert naming
a rank minus the job's own line saying it injected the fault. Prints a markdown table: median and
worst latency, whether every run named rank 3 alone, the summary's first words, whether the
evidence held a stack showing the training script; then what node B's relay used: its CPU
over the run, and the bytes of looks it sent (the recording's ``o`` records).

Node faults, from step 60 of rank 3: ``sigkill``, rank 3 kills itself with SIGKILL (torchrun
and its peers' gloo tear the rest down); ``relay``, node B's relay killed while its ranks train
on to the job's end; ``flap``, node B's link down 3 s and up again, three times 10 s apart (the
bench ends the job 8 s later). For each: every alert raised from the fault on, whether they are
the one expected (``rank_lost`` naming rank 3; one ``node_unwatched`` warning; one
``link_flapping`` warning), how soon (from the kill, the relay's death, the first drop; for the
kill, also from when the monitor first heard the teardown, the peers' last words), and what
``distmon report`` of the recording, stopped a second after the job ended, says of rank 3 at
the end. A run the machine's other users end (a SIGTERM or SIGKILL to every torchrun) is made
again; ``--keep DIR`` keeps each run's recording and logs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from distmon.monitor.recording.format import AlertEvent, ColumnRecord, LooksRecord  # noqa: E402
from distmon.monitor.recording.reader import RecordingError, read_recording  # noqa: E402
from distmon.wire import FLAG_RAISED, FLAG_STOPPED_BY_SIGNAL  # noqa: E402
from tests.support.commands import DISTMON, TORCHRUN, free_port  # noqa: E402
from tests.support.nodes import Node, nodes  # noqa: E402
from tests.support.paths import TRAIN  # noqa: E402

SECONDS = {"hang": 8, "stop": 8, "regex": 8}
"""How long each fault of rank 3 lasts: the job goes on after it."""
NODE_FAULTS = ("relay", "flap", "sigkill")
"""Faults of node B as a whole, or told by its node: its relay killed while its ranks train on;
its link down 3 s and up again, three times 10 s apart; rank 3 killed (SIGKILL) while torchrun
tears the others down."""
FAULT_STEP = 60
FLAPS, DOWN, APART = 3, 3.0, 10.0
STEPS = {"relay": 700, "flap": 2000}
"""Steps of the job: node faults need it to run on past them (a flapping job is ended by the bench)."""


class Interrupted(Exception):
    """The job was ended from outside before the bench was done with it: another engineer's
    clean-up on this shared machine (a SIGTERM or SIGKILL to every torchrun). The run is made again."""


def run_once(fault: str, workdir: Path, no_ptrace: bool) -> dict[str, object]:
    out = workdir / "job.distmon"
    rdzv, port = free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []
    acted: dict[str, object] = {}
    with nodes(["node-a", "node-b"]) as (head, made):
        upstream = f"tcp://{head}:{port}"
        recorder = subprocess.Popen([*DISTMON, "record", "--out", str(out), "--endpoint", upstream],
                                    stderr=(workdir / "record.log").open("w"))  # fmt: skip
        _wait(lambda: "listening on" in (workdir / "record.log").read_text(), 60)
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
                train = [str(TRAIN), "--distmon", "--workers", "0", "--timeout", "120"]
                train += ["--steps", str(STEPS.get(fault, 200)), "--step-time", "0.05"]
                if fault not in ("relay", "flap"):
                    train += ["--fault", f"{fault}@{FAULT_STEP}:3:{SECONDS.get(fault, 0)}"]
                launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                launcher += ["--rdzv-id", "bench", "--local-addr", node.address]
                env = {**os.environ, "DISTMON_ENDPOINT": listen, "GLOO_SOCKET_IFNAME": node.inside,
                       "DISTMON_INTERVAL": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}  # fmt: skip
                log = (workdir / f"job-{node.name}.log").open("w")
                started.append(subprocess.Popen(node.command([*launcher, *train]), env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
            begun = time.time()
            jobs = started[1::2]
            if fault in ("relay", "flap"):
                _wait(lambda: _steps(out, 3) >= FAULT_STEP or any(p.poll() is not None for p in jobs), 120)
                if any(p.poll() is not None for p in jobs):
                    raise Interrupted(f"the job ended before step {FAULT_STEP}")
            if fault == "relay":
                acted["at"] = time.time()
                _end(started[2])  # node B's relay: after node A's relay and job
            elif fault == "flap":
                acted["cuts"] = _flap(made[1])
                time.sleep(8)
                if any(p.poll() is not None for p in jobs):
                    raise Interrupted("the job ended while its link flapped")
                for process in started:
                    _end(process)
            acted["exits"] = exits = [process.wait(180) for process in jobs]
            cpu = _cpu(relay_b)
            signalled = any("SignalException" in (workdir / f"job-{n.name}.log").read_text() for n in made)
            if fault != "flap" and (min(exits) < 0 or signalled):
                raise Interrupted("torchrun ended by a signal")
            wall = time.time() - begun
            acted["ended"] = time.time()
            time.sleep(1)  # a recorder stopped a second after the job ended
        finally:
            for process in started:
                _end(process)
            recorder.send_signal(signal.SIGINT)
            recorder.wait(30)
    if fault in NODE_FAULTS:
        return _measure_node(fault, workdir, out, acted)
    return _measure(fault, workdir, out, cpu, wall)


def _wait(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not come that far")
        time.sleep(0.2)


def _steps(out: Path, rank: int) -> int:
    """The latest step ``rank`` reported in the recording so far (through a relay's columns)."""
    try:
        _, records = read_recording(str(out))
        steps = [
            int(r.batch.headers["steps"][r.batch.headers["rank"] == rank].max(initial=-1))
            for r in records
            if isinstance(r, ColumnRecord)
        ]
    except RecordingError:
        return -1
    return max(steps, default=-1)


def _flap(node: Node) -> list[tuple[float, float]]:
    """Node ``node``'s link down :data:`DOWN` seconds and up again, :data:`FLAPS` times
    :data:`APART` seconds apart: when each went down and came back."""
    cuts = []
    for i in range(FLAPS):
        down = time.time()
        node.cut()
        time.sleep(DOWN)
        node.mend()
        cuts.append((down, time.time()))
        if i < FLAPS - 1:
            time.sleep(APART - (time.time() - down))
    return cuts


def _cpu(process: psutil.Process | None) -> float:
    """CPU seconds ``process`` and its children used so far (0 once it is gone)."""
    try:
        family = [process, *process.children(recursive=True)] if process is not None else []
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in family:
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


def _measure_node(fault: str, workdir: Path, out: Path, acted: dict[str, object]) -> dict[str, object]:
    """What the monitor said of a node fault: every alert raised from the fault on (kind,
    severity, ranks, summary), how soon the one that tells it came, and the report's last word
    on node B's ranks."""
    _, records = read_recording(str(out))
    records = list(records)
    if fault == "flap":
        cuts: list[tuple[float, float]] = acted["cuts"]  # type: ignore[assignment]
        at, until = cuts[0][0], cuts[-1][1] + 8
        told = cuts[1][1]  # a second drop, once the link is back, makes it a flapping link
    elif fault == "relay":
        at, until = float(acted["at"]), float(acted["ended"])  # type: ignore[arg-type]
        told = at
    else:
        found = re.search(r"injecting sigkill at step \d+, t=([\d.]+)", (workdir / "job-node-b.log").read_text())
        at = float(found.group(1)) if found else 0.0
        until, told = float(acted["ended"]) + 1, _teardown_heard(records, at)  # type: ignore[arg-type]
    raised = [r for r in records if isinstance(r, AlertEvent) and r.event == "raised" and at - 0.5 <= r.t <= until]
    kind = {"relay": "node_unwatched", "flap": "link_flapping", "sigkill": "rank_lost"}[fault]
    alert = next((r for r in raised if r.alert.kind == kind), None)
    report = subprocess.run([*DISTMON, "report", str(out)], capture_output=True, text=True, timeout=120).stdout
    ends = [line.split("step", 1)[-1].split(None, 1)[-1] for line in report.splitlines() if " rank     3 " in line]
    cause = next((line for line in report.splitlines() if line.startswith("FIRST CAUSE")), "")
    return {
        "fault": fault,
        "latency": None if alert is None else alert.t - at,
        "after": None if alert is None or told is None else alert.t - told,
        "alerts": [(r.alert.kind, r.alert.severity, r.alert.ranks) for r in raised],
        "words": alert.alert.summary if alert else None,
        "rank_3_at_the_end": ends[0] if ends else None,
        "first_cause": cause.split(": ", 1)[-1],
        "exits": acted["exits"],
    }


def _teardown_heard(records: list[object], killed: float) -> float | None:
    """When the monitor first heard another rank's last words after rank 3 was killed
    (torchrun's SIGTERM, or a peer's error on losing it)."""
    last_words = FLAG_STOPPED_BY_SIGNAL | FLAG_RAISED
    for r in records:
        if isinstance(r, ColumnRecord) and r.t >= killed:
            h = r.batch.headers
            if ((h["rank"] != 3) & (h["flags"] & last_words > 0)).any():
                return r.t
    return None


def _node_table(rows: list[tuple[str, list[dict[str, object]]]]) -> None:
    print("| fault | right | median s | worst s | after the teardown s | alerts | words | rank 3 at the end |")
    print("|---|---|---:|---:|---:|---|---|---|")
    for fault, runs in rows:
        want = {"relay": ("node_unwatched", "warning", []), "flap": ("link_flapping", "warning", [])}.get(fault)
        right = sum(
            (r["alerts"] == [want]) if want else any(a == ("rank_lost", "critical", [3]) for a in r["alerts"])  # type: ignore[union-attr]
            for r in runs
        )
        times = [float(r["latency"]) for r in runs if r["latency"] is not None]  # type: ignore[arg-type]
        after = [float(r["after"]) for r in runs if r["after"] is not None]  # type: ignore[arg-type]
        alerts = "; ".join(sorted({", ".join(f"{k} {s} {rs}" for k, s, rs in r["alerts"]) for r in runs}))  # type: ignore[attr-defined]
        words = "; ".join(sorted({str(r["words"]) for r in runs}))
        ends = "; ".join(sorted({str(r["rank_3_at_the_end"]) for r in runs}))
        median = f"{statistics.median(times):.1f}" if times else "-"
        worst = f"{max(times):.1f}" if len(times) == len(runs) else "missed"
        late = f"{max(after):.1f}" if fault == "sigkill" and after else "-"
        print(f"| {fault} | {right}/{len(runs)} | {median} | {worst} | {late} | {alerts} | {words} | {ends} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--faults", nargs="+", default=["hang", "stop", "regex"], choices=[*SECONDS, *NODE_FAULTS])
    parser.add_argument("--no-ptrace", action="store_true", help="node B's relay without CAP_SYS_PTRACE")
    parser.add_argument("--keep", type=Path, help="keep each run's recording and logs under this folder")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the nodes made are removed on the way out
    rows = []
    for fault in args.faults:
        runs = []
        for _ in range(args.runs):
            for _attempt in range(3):
                with tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp:
                    try:
                        runs.append(run_once(fault, Path(tmp), args.no_ptrace))
                    except Interrupted as e:
                        print(f"{fault}: run interrupted ({e}); again", file=sys.stderr)
                        continue
                    if args.keep is not None:
                        shutil.copytree(tmp, args.keep / f"{fault}-{len(runs)}")
                    break
            print(json.dumps(runs[-1]), file=sys.stderr)
        rows.append((fault, runs))
    print(f"load {os.getloadavg()[0]:.1f}; node B's relay {'without' if args.no_ptrace else 'with'} CAP_SYS_PTRACE")
    node_rows = [(fault, runs) for fault, runs in rows if fault in NODE_FAULTS]
    rows = [(fault, runs) for fault, runs in rows if fault not in NODE_FAULTS]
    if node_rows:
        _node_table(node_rows)
    if not rows:
        return
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
