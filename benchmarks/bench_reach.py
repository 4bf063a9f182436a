"""Reaching a job's nodes from one host (``distmon look --hosts``, ``--slurm``): from a fault to
its culprit named from the head, on two real nodes over ssh and over Slurm; how long reaching N
nodes takes.

    .venv/bin/python benchmarks/bench_reach.py two [--runs 3]
    .venv/bin/python benchmarks/bench_reach.py many [--nodes 1 4 8 16]
    .venv/bin/python benchmarks/bench_reach.py fanout [--nodes 64 256 1024]

``two``: two network-namespace nodes, an sshd and a slurmd in each (``tests/support``), a job of
4 gloo ranks (torchrun across the nodes; then a Slurm batch job, a task a rank) whose rank 3
falls asleep at step 20; ``distmon look`` is run from the head (``--hosts node-a,node-b``, then
``--slurm``) the moment the job prints the fault. Named = the first alert naming rank 3 in look's
recording, less the fault's time; answered = when look exited, less the fault's time.

``many``: N nodes, each with its sshd; the eyes started by the head at once (``Eyes.over_ssh``)
until each answered: real ``distmon eye`` processes, every one on this machine's 2 cores.

``fanout``: the head's part alone, to many nodes: a stand-in ssh that takes 0.2 s to connect and
answers as an eye does, N at once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from distmon import keys  # noqa: E402
from distmon.monitor.intake.feeds import LiveFeed  # noqa: E402
from distmon.monitor.recording.format import AlertEvent  # noqa: E402
from distmon.monitor.recording.reader import read_recording  # noqa: E402
from distmon.reach.eyes import SSH_ENV, Eyes  # noqa: E402
from tests.support.commands import DISTMON, TORCHRUN, free_port  # noqa: E402
from tests.support.nodes import nodes, ssh_to  # noqa: E402
from tests.support.paths import TRAIN  # noqa: E402
from tests.support.processes import kill_tree, start  # noqa: E402
from tests.support.slurm import slurm  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
TRAINING = [sys.executable, str(TRAIN), "--workers", "0", "--timeout", "300", "--step-time", "0.02"]
TRAINING += ["--fault", "hang", "--fault-rank", "3", "--fault-step", "20", "--hang-seconds", "600"]
STAND_IN = """#!/bin/sh
sleep 0.2
while [ "${1#-}" != "$1" ]; do case "$1" in -o|-F) shift 2;; *) shift;; esac; done
printf '{"host": "%s", "version": "x", "pyspy": true, "jobs": {}}\\n' "$1"
exec cat >/dev/null
"""


def injected(log: Path) -> float | None:
    text = log.read_text(errors="replace") if log.exists() else ""
    for line in text.splitlines():
        if "injecting hang at step" in line:
            return float(line.rsplit("t=", 1)[1])
    return None


def named_at(recording: Path) -> float | None:
    _, records = read_recording(str(recording))
    return next((r.t for r in records if isinstance(r, AlertEvent) and r.alert.ranks == [3]), None)


def look_now(log: Path, argv: list[str], env: dict[str, str], out: Path) -> tuple[float, float]:
    wait_until(lambda: injected(log) is not None, 300, "the fault")
    fault = injected(log)
    assert fault is not None
    subprocess.run([*DISTMON, "look", *argv, "--out", str(out)], env=env, capture_output=True, timeout=120)
    answered = time.time() - fault
    at = named_at(out)
    return (at - fault if at is not None else float("nan")), answered


def two(runs: int) -> None:
    results: dict[str, list[tuple[float, float]]] = {"ssh": [], "slurm": []}
    with tempfile.TemporaryDirectory() as tmp, nodes(["node-a", "node-b"]) as (head, made):
        folder = Path(tmp)
        with ssh_to(made, folder / "ssh") as config, slurm(head, made, folder / "slurm", free_port()):
            env = {**ENV, SSH_ENV: f"ssh -F {config}"}
            for run in range(runs):
                rdzv, started = free_port(), []
                for k, node in enumerate(made):
                    launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                    launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                    launcher += ["--rdzv-id", f"bench{run}", "--local-addr", node.address]
                    with (folder / f"job-{run}-{node.name}.log").open("w") as log:
                        argv = node.command([*launcher, *TRAINING[1:]])
                        started.append(start(argv, env={**ENV, "GLOO_SOCKET_IFNAME": node.inside}, stdout=log,
                                             stderr=subprocess.STDOUT))  # fmt: skip
                try:
                    log = folder / f"job-{run}-node-b.log"
                    results["ssh"].append(look_now(log, ["--hosts", "node-a,node-b"], env, folder / f"s{run}.distmon"))
                finally:
                    for process in started:
                        kill_tree(process)
                script, log = folder / f"job{run}.sh", folder / f"slurm-{run}.log"
                script.write_text(f"#!/bin/sh\nexec srun {' '.join(TRAINING)}\n")
                job_env = {**os.environ, **ENV, "MASTER_ADDR": made[0].address, "MASTER_PORT": str(free_port())}
                subprocess.run(["sbatch", "-N2", "-n4", "-o", str(log), str(script)], env=job_env, check=True)
                try:
                    results["slurm"].append(
                        look_now(log, ["--slurm"], {**os.environ, **ENV}, folder / f"l{run}.distmon")
                    )
                finally:
                    subprocess.run(["scancel", "--user", "root"], capture_output=True)
                    time.sleep(2)
    for how, found in results.items():
        named = ", ".join(f"{n:.1f}" for n, _ in found)
        answered = ", ".join(f"{a:.1f}" for _, a in found)
        print(f"{how:>5}: named {named} s after the fault (median {statistics.median(n for n, _ in found):.1f}); "
              f"look answered at {answered} s")  # fmt: skip


def reach(hosts: list[str]) -> float:
    """Seconds from starting an eye on each of ``hosts`` to every one's answer."""
    key = keys.fresh()
    with tempfile.TemporaryDirectory() as tmp:
        feed = LiveFeed(f"ipc://{tmp}/head.sock", eyes=key)
        assert feed.eyes_port is not None
        eyes = Eyes(feed.eyes_port, key, None, [sys.executable])
        began = time.monotonic()
        eyes.over_ssh(hosts)
        eyes.wait(300)
        took = time.monotonic() - began
        states = {node.state for node in eyes.nodes.values()}
        eyes.close()
        feed.close()
    assert states == {"seen"}, states
    return took


def many(counts: list[int]) -> None:
    for n in counts:
        names = [f"node-{chr(ord('a') + i // 26)}{chr(ord('a') + i % 26)}" for i in range(n)]
        with tempfile.TemporaryDirectory() as tmp, nodes(names) as (_, made), ssh_to(made, Path(tmp)) as config:
            os.environ[SSH_ENV] = f"ssh -F {config}"
            took = reach([node.name for node in made])
        print(f"{n:>5} nodes, real eyes: every one answered in {took:.1f} s")


def fanout(counts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ssh = Path(tmp) / "ssh"
        ssh.write_text(STAND_IN)
        ssh.chmod(0o755)
        os.environ[SSH_ENV] = str(ssh)
        for n in counts:
            took = reach([f"node{i:05d}" for i in range(n)])
            print(f"{n:>5} nodes, stand-in eyes 0.2 s away: every one answered in {took:.1f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["two", "many", "fanout"])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--nodes", type=int, nargs="+")
    args = p.parse_args()
    if args.what == "two":
        two(args.runs)
    elif args.what == "many":
        many(args.nodes or [1, 4, 8, 16])
    else:
        fanout(args.nodes or [64, 256, 1024])


if __name__ == "__main__":
    main()
