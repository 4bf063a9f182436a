"""The hosts a job runs on, as its launcher wrote them down (:mod:`distmon.node.jobhosts`):
Slurm's host lists, MPI hostfiles and rankfiles, mpirun's command line; within limits, whatever
the text holds; and who a store hears from, on a real listening socket."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distmon.node import jobhosts
from distmon.node.jobhosts import hostfile_hosts, hostlist, mpirun_hosts, rankfile_hosts
from distmon.node.launchers import argv_rank, node_list, ray_train_rank, store_of, tree_rank
from tests.support.waiting import wait_until


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node-a", ["node-a"]),
        ("node-a,node-b", ["node-a", "node-b"]),
        ("gpu[01-03,7]", ["gpu01", "gpu02", "gpu03", "gpu7"]),
        ("r[1-2]n[1-2],x", ["r1n1", "r1n2", "r2n1", "r2n2", "x"]),
        ("node[008-010]", ["node008", "node009", "node010"]),
        ("", []),
    ],
)
def test_slurm_host_lists_are_expanded_as_slurm_writes_them(text: str, hosts: list[str]) -> None:
    assert hostlist(text) == hosts


@pytest.mark.parametrize("text", ["node[1-", "node]", "node[a-b]", "node[5-2]", "node[1-99999999]", "no de"])
def test_a_host_list_slurm_would_not_write_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        hostlist(text)


def test_a_host_list_stops_at_its_limit() -> None:
    assert len(hostlist("n[0-60000],m[0-60000]")) == jobhosts.MAX_HOSTS


@given(st.text(max_size=200))
def test_any_text_is_a_host_list_or_refused_in_one_error(text: str) -> None:
    try:
        hosts = hostlist(text)
    except ValueError:
        return
    assert len(hosts) <= jobhosts.MAX_HOSTS


def test_hostfiles_and_rankfiles_name_their_hosts_once_each() -> None:
    hostfile = "# the nodes\nnode-a slots=2\nnode-b:4\n\nnode-a max_slots=8\n"
    assert hostfile_hosts(hostfile) == ["node-a", "node-b"]
    rankfile = "rank 0=node-a slot=0\nrank 1=node-a slot=1\nrank 2=node-c slot=0 # last\n"
    assert rankfile_hosts(rankfile) == ["node-a", "node-c"]


def test_mpirun_names_its_hosts_on_its_command_line_or_in_its_files() -> None:
    files = {"hosts.txt": "node-c slots=2\nnode-d slots=2\n", "ranks.txt": "rank 0=node-e slot=0\n"}
    read = lambda path: files.get(path, "")  # noqa: E731
    argv = ["mpirun", "--allow-run-as-root", "--host", "node-a:2,node-b:2", "-np", "4", "python", "train.py"]
    assert mpirun_hosts(argv, read) == ["node-a", "node-b"]
    assert mpirun_hosts(["mpirun", "-H", "x,y", "python", "t.py", "--host", "z"], read) == ["x", "y"]
    assert mpirun_hosts(["mpirun", "--hostfile=hosts.txt", "-np", "4", "python", "t.py"], read) == ["node-c", "node-d"]
    assert mpirun_hosts(["prterun", "-rf", "ranks.txt", "python", "t.py"], read) == ["node-e"]
    assert mpirun_hosts(["mpirun", "--hostfile", "gone.txt", "python", "t.py"], read) == []
    assert jobhosts.is_mpirun(["/usr/bin/mpirun", "-np", "2"]) and not jobhosts.is_mpirun(["python", "mpirun.py"])


def test_a_rank_says_where_its_job_meets_and_its_place_where_its_launcher_wrote_it() -> None:
    assert store_of({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) == ("10.0.0.1", 29500)
    assert store_of({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "99999"}) is None
    assert node_list({"SLURM_JOB_NODELIST": "gpu[1-2]"}) == ["gpu1", "gpu2"]
    assert node_list({"SLURM_JOB_NODELIST": "gpu[1-"}) == []
    assert tree_rank({"NODE_RANK": "1", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}) == (1, 8, 3)
    assert tree_rank({"LOCAL_RANK": "3"}) is None
    assert argv_rank(["python", "w.py", "--rank", "3", "--world-size=8"]) == (3, 8)
    assert argv_rank(["python", "-m", "torch.distributed.launch", "w.py", "--local_rank=1"]) == (1, None)
    assert argv_rank(["python", "w.py", "--ranks", "4"]) is None


def test_the_hosts_a_store_hears_from_are_its_peers_not_this_host() -> None:
    """A real store: a socket listening on a port, a client connected to it from this host
    (not counted: this host is no other node)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import socket, time
            s = socket.create_connection(("127.0.0.1", {port}))
            time.sleep(30)
        """)]
    )  # fmt: skip
    try:
        accepted, _ = server.accept()
        assert jobhosts.store_peers(port) == []  # connected from here: no other host
        assert jobhosts.is_here("127.0.0.1") and jobhosts.is_here(socket.gethostname())
        assert not jobhosts.is_here("node-that-is-not-here")
        accepted.close()
    finally:
        client.kill()
        client.wait()
        server.close()
    wait_until(lambda: client.poll() is not None, 5, "the client to end")


def test_a_ray_train_workers_rank_is_read_where_ray_logs_it() -> None:
    """Ray Train sets RANK in its workers' own environment only; it logs each worker's joining."""
    line = (
        '{"asctime": "2026-01-01 00:00:00,000", "levelname": "DEBUG", "message": "Setting up process group for: '
        'env:// [rank=2, world_size=4]", "run_name": "nightly", "world_rank": 2}'
    )
    assert ray_train_rank("other\n" + line) == (2, 4, "nightly")
    assert ray_train_rank("Setting up process group for: env:// [rank=0, world_size=8]") == (0, 8, None)
    assert ray_train_rank("no such line") is None
