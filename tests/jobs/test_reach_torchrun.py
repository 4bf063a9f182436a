"""A torchrun job over two real nodes (network namespaces, each with its own address, host name
and sshd; gloo across the link), started without distmon, rank 3 asleep on node-b: one
``distmon look`` finds and judges every node of it, from the head over ssh (``--hosts``) or from
node-a by what the job tells there (the hosts its store hears from); run on node-a alone
(``--here``) it blames nobody it cannot see and says where to look; a node that cannot be reached
is said by name, with why; and nothing is left running on any node once a command ends, however
it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.commands import DISTMON, TORCHRUN, distmon, free_port
from tests.support.nodes import Node, can_ssh, nodes, ssh_to
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(bool(can_ssh()), reason=can_ssh() or "")

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@dataclass
class Cluster:
    head: str
    nodes: list[Node]
    env: dict[str, str]
    """With ``DISTMON_SSH``: the test's own ssh config, reaching each node by name."""
    folder: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("reach")
    rdzv = free_port()
    started: list[subprocess.Popen[bytes]] = []
    with nodes(["node-a", "node-b"]) as (head, made), ssh_to(made, folder / "ssh") as config:
        try:
            for k, node in enumerate(made):
                train = [str(TRAIN), "--workers", "0", "--timeout", "300", "--steps", "400"]
                train += ["--fault", "hang@20:3:600", "--step-time", "0.02"]
                launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                launcher += ["--rdzv-id", "reached", "--local-addr", node.address]
                with (folder / f"job-{node.name}.log").open("w") as log:
                    env = {**ENV, "GLOO_SOCKET_IFNAME": node.inside}
                    started.append(
                        start(node.command([*launcher, *train]), env=env, stdout=log, stderr=subprocess.STDOUT)
                    )
            job_log = folder / "job-node-b.log"
            wait_until(lambda: "injecting hang" in job_log.read_text(), 180, "rank 3 to fall asleep")
            yield Cluster(head, made, {**ENV, "DISTMON_SSH": f"ssh -F {config}"}, folder)
        finally:
            for process in started:
                kill_tree(process)


def eyes_left(cluster: Cluster) -> list[str]:
    """``distmon eye`` processes still running on the cluster's nodes (every namespace shares one
    /proc: those of other tests' nodes, and of other tests' looks, are not these)."""
    inside = set()
    for node in cluster.nodes:
        pids = subprocess.run(["ip", "netns", "pids", node.namespace], capture_output=True, text=True)
        inside.update(pids.stdout.split())
    done = subprocess.run(["pgrep", "-af", "--", "-m distmon eye$"], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if line.split(maxsplit=1)[0] in inside]


SECONDS = "20"
"""How long each look looks: long enough that a loaded machine's slow stacks still see the rank
asleep stand still (the figures are the benchmark's, bench_reach.py)."""


def looked(argv: list[str], env: dict[str, str], out: Path) -> tuple[int, list[dict], str]:
    """The look's exit code, its alerts, and what it said: on stderr, and what ``report`` reads
    of what it saw (``--out``), for a failing assertion to show."""
    argv = [*argv, "--json", "--seconds", SECONDS, "--out", str(out)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    seen = distmon("report", out).stdout if out.exists() else "(nothing recorded)"
    return done.returncode, json.loads(done.stdout or "[]"), f"{done.stderr}\n{seen}"


def test_from_the_head_every_node_named_is_reached_and_the_rank_asleep_named(cluster: Cluster) -> None:
    code, alerts, said = looked(
        [*DISTMON, "look", "--hosts", "node-a,node-b"], cluster.env, cluster.folder / "head.distmon"
    )
    assert code == 1, said
    hang = next(a for a in alerts if a["kind"] == "hang")
    assert hang["ranks"] == [3], said
    assert hang["summary"].startswith("rank 3 is asleep in clock_nanosleep; 3 ranks wait for it")
    assert "rank 3 (node-b, pid" in hang["detail"]
    wait_until(lambda: not eyes_left(cluster), 30, "no eye left on any node")


def test_on_a_node_of_the_job_its_other_nodes_are_reached_by_what_the_job_tells(cluster: Cluster) -> None:
    """node-a holds the job's store: the hosts it hears from are the job's other nodes."""
    code, alerts, said = looked(
        cluster.nodes[0].command([*DISTMON, "look"]), cluster.env, cluster.folder / "told.distmon"
    )
    assert code == 1, said
    assert [a["ranks"] for a in alerts if a["kind"] == "hang"] == [[3]], said
    wait_until(lambda: not eyes_left(cluster), 30, "no eye left on any node")


def test_on_one_node_alone_nobody_unseen_is_blamed_and_where_to_look_is_said(cluster: Cluster) -> None:
    code, alerts, said = looked(
        cluster.nodes[0].command([*DISTMON, "look", "--here"]), cluster.env, cluster.folder / "here.distmon"
    )
    assert code == 1, said
    (hang,) = [a for a in alerts if a["kind"] == "hang"]
    assert hang["ranks"] == [] and hang["severity"] == "critical"
    assert hang["summary"].endswith("whom for is not seen (ranks 2-3, on other nodes)")
    assert "distmon look --hosts NODE,..." in hang["detail"]


def test_a_node_that_cannot_be_reached_is_said_by_name_with_why(cluster: Cluster) -> None:
    """node-b's ssh port is not where this config says: what it holds is not seen, nor blamed."""
    config = cluster.folder / "ssh" / "ssh_config"
    wrong = cluster.folder / "ssh" / "wrong_port"
    wrong.write_text("Host node-b\n  Port 2222\n" + config.read_text())
    env = {**cluster.env, "DISTMON_SSH": f"ssh -F {wrong}"}
    argv = [*DISTMON, "look", "--hosts", "node-a,node-b,node-c", "--seconds", SECONDS]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert "Not seen: node-c: not reached over ssh (ssh: Could not resolve hostname node-c" in done.stdout
    assert "Not seen: node-b: not reached over ssh (ssh: connect to host" in done.stdout, done.stdout
    assert "whom for is not seen (ranks 2-3, on other nodes)" in done.stdout, done.stdout
    assert "Nodes not seen:\n    node-b: not reached over ssh" in done.stdout
    assert done.returncode == 1


def test_a_monitor_killed_leaves_nothing_running_on_the_nodes(cluster: Cluster) -> None:
    """``record --find`` reaching both nodes, killed with SIGKILL: its ssh connections close, and
    each eye ends with them."""
    out = cluster.folder / "killed.distmon"
    argv = [*DISTMON, "record", "--find", "--hosts", "node-a,node-b", "--out", str(out)]
    argv += ["--endpoint", f"ipc://{cluster.folder}/killed.sock"]
    recorder = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: out.exists() and len(eyes_left(cluster)) >= 2, 60, "an eye on each node")
    finally:
        recorder.send_signal(signal.SIGKILL)
        recorder.wait()
    wait_until(lambda: not eyes_left(cluster), 30, "every eye to end with its head")
    assert distmon("report", out).returncode == 0
