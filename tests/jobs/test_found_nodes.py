"""A job started without distmon on two real nodes (network namespaces, each with its own address
and host name, gloo across the link), found from outside by ``distmon relay --find`` on each
node, one command per node and nothing in the job changed; ``distmon record`` on the head joins
the nodes' ranks into one job and names the rank asleep on node B, on that node."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.commands import DISTMON, TORCHRUN, distmon, free_port
from tests.support.nodes import can_make_nodes, nodes
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.recorder import recording

pytestmark = pytest.mark.skipif(bool(can_make_nodes()), reason=can_make_nodes() or "")


def test_relays_find_the_ranks_on_their_nodes_and_the_rank_asleep_is_named(tmp_path: Path) -> None:
    out, rdzv, port = tmp_path / "job.distmon", free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    started: list[subprocess.Popen[bytes]] = []
    with nodes(["node-a", "node-b"]) as (head, made):
        upstream = f"tcp://{head}:{port}"
        with recording(out, upstream) as recorder:
            try:
                for k, node in enumerate(made):
                    relay = [*DISTMON, "relay", "--find", "--listen", f"tcp://127.0.0.1:{7100 + k}"]
                    log = (tmp_path / f"relay-{node.name}.log").open("w")
                    started.append(start(node.command([*relay, "--upstream", upstream]), stderr=log))
                    train = [str(TRAIN), "--workers", "0", "--timeout", "120", "--steps", "400"]
                    train += ["--fault", "hang@40:3:300"]
                    launcher = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(k)]
                    launcher += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{made[0].address}:{rdzv}"]
                    launcher += ["--rdzv-id", "found", "--local-addr", node.address]
                    log = (tmp_path / f"job-{node.name}.log").open("w")
                    ranks = {**env, "GLOO_SOCKET_IFNAME": node.inside}
                    started.append(
                        start(node.command([*launcher, *train]), env=ranks, stdout=log, stderr=subprocess.STDOUT)
                    )
                recorder.wait_critical("hang", 240)
                alerts = recorder.alerts()
            finally:
                for process in started:
                    kill_tree(process)
    hang = next(a for a in alerts if a["kind"] == "hang")
    assert hang["ranks"] == [3], alerts
    # the waiters are counted as the eyes have seen each stand still: under load, one may not be yet
    assert re.match(r"rank 3 is asleep in clock_nanosleep; [23] ranks wait for it", hang["summary"]), hang["summary"]
    assert "rank 3 (node-b, pid" in hang["detail"] and "found without the hook" in hang["detail"]
    report = distmon("report", out).stdout
    assert ": 4 ranks on 2 hosts, found without the hook" in report, report
