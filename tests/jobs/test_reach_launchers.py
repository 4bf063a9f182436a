"""Jobs spread over two real nodes by the launchers of a cluster, found from the head with one
``distmon look``: Open MPI's mpirun, run on the head, starting its ranks on the nodes over ssh
(look reads its hosts off its command line), and a real Slurm (munge, slurmctld on the head, a
slurmd in each node) running a batch job of one task a rank (``look --slurm`` reaches its nodes
as a step of the job, no ssh). In each, rank 3 falls asleep on node-b."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.commands import DISTMON, free_port
from tests.support.nodes import Node, can_ssh, nodes, ssh_to
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.slurm import can_run_slurm, slurm
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(bool(can_ssh()), reason=can_ssh() or "")

SECONDS = 30
"""How long each look looks: long enough that a loaded machine's slow stacks still see the rank
asleep stand still (the figures are the benchmark's, bench_reach.py)."""
FORWARDED = ("MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "PYTHONUNBUFFERED")


def environment(**more: str) -> dict[str, str]:
    """This process's environment as it is now (a Slurm cluster sets ``SLURM_CONF`` in it)."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **more}


TRAINING = [sys.executable, str(TRAIN), "--workers", "0", "--timeout", "300", "--step-time", "0.02"]
TRAINING += ["--fault", "hang", "--fault-rank", "3", "--fault-step", "20", "--hang-seconds", "600"]


@dataclass
class Cluster:
    head: str
    nodes: list[Node]
    config: Path
    folder: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("launchers")
    with nodes(["node-a", "node-b"]) as (head, made), ssh_to(made, folder / "ssh") as config:
        yield Cluster(head, made, config, folder)


def look(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    argv = ["look", *argv, "--json", "--seconds", str(SECONDS)]
    done = subprocess.run([*DISTMON, *argv], env=env, capture_output=True, text=True, timeout=120)
    return done, json.loads(done.stdout or "[]")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed (apt install openmpi-bin)")
def test_mpirun_on_the_head_has_its_hosts_read_and_reached(cluster: Cluster) -> None:
    subnet = cluster.head.rsplit(".", 1)[0] + ".0/24"
    env = environment(MASTER_ADDR=cluster.nodes[0].address, MASTER_PORT=str(free_port()))
    env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env |= {"OMPI_MCA_plm_rsh_agent": f"ssh -F {cluster.config}", "OMPI_MCA_oob_tcp_if_include": subnet}
    forward = [arg for name in FORWARDED for arg in ("-x", name)]
    argv = ["mpirun", "--host", "node-a:2,node-b:2", "-np", "4", *forward, *TRAINING]
    log = cluster.folder / "mpirun.log"
    with log.open("w") as out:
        job = start(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "injecting hang" in log.read_text(), 180, "rank 3 to fall asleep")
        done, alerts = look(["--pid", str(job.pid)], environment(DISTMON_SSH=f"ssh -F {cluster.config}"))
    finally:
        kill_tree(job)
    assert done.returncode == 1, done.stderr
    hang = next(a for a in alerts if a["kind"] == "hang")
    assert hang["ranks"] == [3] and "rank 3 (node-b, pid" in hang["detail"], alerts


@pytest.mark.skipif(bool(can_run_slurm()), reason=can_run_slurm() or "")
def test_a_slurm_jobs_nodes_are_reached_as_a_step_of_it(cluster: Cluster) -> None:
    with slurm(cluster.head, cluster.nodes, cluster.folder / "slurm", free_port()):
        script = cluster.folder / "job.sh"
        script.write_text(f"#!/bin/sh\nexec srun {' '.join(TRAINING)}\n")
        log = cluster.folder / "slurm-job.log"
        env = environment(MASTER_ADDR=cluster.nodes[0].address, MASTER_PORT=str(free_port()))
        subprocess.run(["sbatch", "-N2", "-n4", "-o", str(log), str(script)], env=env, check=True, capture_output=True)
        wait_until(lambda: log.exists() and "injecting hang" in log.read_text(), 180, "rank 3 to fall asleep")
        done, alerts = look(["--slurm"], environment())  # the user's one running job
        assert done.returncode == 1, done.stderr
        hang = next(a for a in alerts if a["kind"] == "hang")
        assert hang["ranks"] == [3] and "rank 3 (node-b, pid" in hang["detail"], alerts
        wait_until(lambda: "sh" not in steps(), 30, "the eyes' step to end with look")


def steps() -> list[str]:
    """The names of the steps running in Slurm (the eyes' is ``sh``)."""
    return subprocess.run(["squeue", "-h", "-s", "-o", "%j"], capture_output=True, text=True).stdout.split()
