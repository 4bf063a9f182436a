"""Reaching other nodes (:mod:`distmon.reach`): real ``distmon eye`` processes started through an
ssh that runs its command here (``$DISTMON_SSH``), reporting to a real feed with the key made for
them; how each node fares, said as the head tells the monitor; nothing left running after.
The same over real sshd and Slurm across nodes: ``tests/jobs/test_reach_*.py``."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import distmon
from distmon import keys, wire
from distmon.commands.look import _unheard
from distmon.commands.shared.finding import add_finding_arguments, problem
from distmon.monitor.intake.feeds import LiveFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.node import looks
from distmon.reach.eyes import SSH_ENV, Eyes, Node
from distmon.reach.plan import ReachError, given
from tests.support.messages import T0, report
from tests.support.waiting import wait_until

FAKE_SSH = """#!/bin/sh
# ssh as a node would run it: its options skipped, its command run here, as sshd would run it there
while [ "${1#-}" != "$1" ]; do case "$1" in -o|-F) shift 2;; *) shift;; esac; done
host=$1; shift
if [ "$host" = unreachable ]; then echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255; fi
export SSH_CONNECTION="127.0.0.1 40000 127.0.0.1 22"
exec sh -c "$*"
"""


@pytest.fixture
def head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LiveFeed, keys.JobKey]]:
    """A feed listening for eyes with a key of its own, and an ssh that reaches this host."""
    ssh = tmp_path / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv(SSH_ENV, str(ssh))
    key = keys.fresh()
    feed = LiveFeed(f"ipc://{tmp_path}/head.sock", eyes=key)
    yield feed, key
    feed.close()


def eyes_running() -> list[str]:
    done = subprocess.run(["pgrep", "-af", "distmon eye"], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if "pgrep" not in line and str(os.getpid()) not in line]


def test_a_node_reached_answers_reports_to_the_head_and_ends_with_it(head: tuple[LiveFeed, keys.JobKey]) -> None:
    feed, key = head
    assert feed.eyes_port is not None
    eyes = Eyes(feed.eyes_port, key, None, ["/nowhere/python", sys.executable])  # the first with distmon runs it
    eyes.over_ssh(["node-x"])
    eyes.wait()
    node = eyes.nodes["node-x"]
    assert node.state == looks.SEEN, node
    assert node.answer["version"] == distmon.__version__ and isinstance(node.answer["jobs"], dict)
    heard: list[object] = []
    wait_until(lambda: bool(heard.extend(m for _, m in feed.take(100))) or bool(heard), 20, "the eye's batch")
    assert [(r.host, r.state) for r in eyes.news()] == [("node-x", looks.SEEN)]
    assert eyes.news() == [], "told once"
    eyes.close()
    wait_until(lambda: not eyes_running(), 10, "the eye to end")


def test_how_a_node_fared_tells_the_ranks_of_the_job_its_eye_found_there() -> None:
    """Of the job followed (of the one found, where none is named yet); what an eye says of
    them is read as claims: only ranks."""
    answer = {"jobs": {"j1": {"ranks": [2, 3]}, "j2": {"ranks": [0, 1]}}}
    followed = Eyes(0, keys.fresh(), "j1", [sys.executable])
    followed.nodes["b"] = Node("b", looks.SSH, looks.SEEN, answer=answer)
    assert [r.ranks for r in followed.news()] == [(2, 3)]
    followed.close()
    none_named = Eyes(0, keys.fresh(), None, [sys.executable])
    none_named.nodes["b"] = Node("b", looks.SSH, looks.SEEN, answer=answer)
    none_named.nodes["c"] = Node("c", looks.SSH, looks.SEEN, answer={"jobs": {"j1": {"ranks": ["4", -1, 5, True]}}})
    assert [r.ranks for r in none_named.news()] == [(), (5,)]
    none_named.close()


def test_nodes_not_reached_say_why_each(
    head: tuple[LiveFeed, keys.JobKey], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    feed, key = head
    assert feed.eyes_port is not None
    bare = tmp_path / "python"  # a Python that imports distmon (a checkout beside it) but none of its dependencies
    bare.write_text(f'#!/bin/sh\nPYTHONPATH={Path(distmon.__file__).parents[1]} exec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    eyes = Eyes(feed.eyes_port, key, None, ["/nowhere/python", str(bare)])
    eyes.over_ssh(["unreachable", "bare"])
    eyes.wait()
    assert eyes.nodes["unreachable"].state == looks.UNREACHABLE
    assert eyes.nodes["unreachable"].detail == "ssh: connect to host unreachable port 22: Connection refused"
    assert eyes.nodes["bare"].state == looks.NO_DISTMON
    assert re.fullmatch(rf"tried /nowhere/python \(not there\), {bare} \(no \w+\)", eyes.nodes["bare"].detail)
    eyes.close()
    monkeypatch.setattr(distmon, "__version__", "0.0.1")
    eyes = Eyes(feed.eyes_port, key, None, [sys.executable])
    eyes.over_ssh(["older"])
    eyes.wait()
    older = eyes.nodes["older"]
    assert older.state == looks.OTHER_VERSION
    assert older.detail == f"it runs distmon {older.answer['version']}, this is 0.0.1"
    eyes.close()


def test_an_eye_whose_head_is_gone_ends_itself(head: tuple[LiveFeed, keys.JobKey]) -> None:
    """Its input stays open (a head killed with its srun leaves a Slurm step's tasks running):
    its lifeline ends it."""
    feed, key = head
    feed.close()  # the head is gone: nothing listens on the port any more
    assert feed.eyes_port is not None
    eyes = Eyes(feed.eyes_port, key, None, [sys.executable], lifeline=1.0)
    eyes.over_ssh(["node-x"])
    eyes.wait()
    wait_until(lambda: eyes.nodes["node-x"].state == looks.ENDED, 20, "the eye to end by itself")
    eyes.close()


def test_the_nodes_named_are_read_and_a_mistake_is_one_line(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node-c slots=2\n# a comment\nnode-d\n")
    plan = given(None, "node-a,node-b", str(hostfile))
    assert plan is not None and plan.ssh == ["node-a", "node-b", "node-c", "node-d"] and not plan.widen
    assert given(None, None, None) is None
    with pytest.raises(ReachError, match="--hosts: unbalanced"):
        given(None, "node-[a", None)
    with pytest.raises(ReachError, match="cannot read"):
        given(None, None, str(tmp_path / "none"))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--hosts", "a"], "--hosts goes with --find: give --find too"),
        (["--find", "--here", "--slurm"], "--here looks on this host only"),
        (["--find", "--hosts", "a,b"], None),
    ],
)
def test_the_reach_options_go_with_find(argv: list[str], said: str | None) -> None:
    parser = argparse.ArgumentParser()
    add_finding_arguments(parser)
    told = problem(parser.parse_args(argv))
    assert told == said if said is None else told is not None and told.startswith(said)


def test_a_slurm_job_that_is_not_there_is_said_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2\nexit 1\n")
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ReachError, match="Slurm knows no job 77"):
        given("77", None, None)


def test_a_job_here_beside_an_mpirun_whose_ranks_run_elsewhere_is_a_choice_said() -> None:
    """On a head node that runs a job of its own and an ``mpirun`` of ranks on other hosts, a
    bare look follows neither without a word: it names both and asks for --pid."""
    from distmon.commands.look import _not_also_launched
    from distmon.node.finder import Found, FoundRank

    rank = FoundRank(pid=101, rank=0, world=1, local_rank=0, job="torchrun-100", started=0.0, launcher=100)
    alone = Found({"torchrun-100": [rank]})
    assert _not_also_launched(alone, "torchrun-100", {101: 100}) == ("torchrun-100", "")
    both = Found({"torchrun-100": [rank]}, launchers={200: ["node-a", "node-b"]})
    job, said = _not_also_launched(both, "torchrun-100", {101: 100, 200: 1})
    assert job is None and said.startswith("2 jobs start here, pick one with --pid"), said
    assert "mpirun pid 200, its ranks on node-a, node-b" in said, said


def test_the_nodes_named_are_followed_not_a_job_of_this_host_alone() -> None:
    """Nodes named with --hosts or --slurm: the job found on them is followed, though another
    runs here; this host's job counts where the nodes found it too."""
    from types import SimpleNamespace

    from distmon.commands.look import _job_of

    eyes = SimpleNamespace(nodes={"node-a": SimpleNamespace(jobs={"theirs": {}})})
    assert _job_of(eyes, "mine") == "theirs"  # type: ignore[arg-type]
    eyes.nodes["node-b"] = SimpleNamespace(jobs={"mine": {}})
    assert _job_of(eyes, "mine") == "mine"  # type: ignore[arg-type]
    assert _job_of(SimpleNamespace(nodes={}), "mine") == "mine"  # type: ignore[arg-type]


def test_the_slurm_job_asked_for_is_followed_before_any_node_has_found_it() -> None:
    """--slurm names the job: its ranks' job is followed, not another this host runs, though the
    nodes' eyes answered before their first look found it; where they found it under another
    name only (DISTMON_JOB_ID), the job on most nodes is."""
    from types import SimpleNamespace

    from distmon.commands.look import _job_of

    assert _job_of(SimpleNamespace(nodes={}), "mine", "slurm-7") == "slurm-7"  # type: ignore[arg-type]
    eyes = SimpleNamespace(nodes={"node-a": SimpleNamespace(jobs={"slurm-7": {}, "theirs": {}})})
    assert _job_of(eyes, "mine", "slurm-7") == "slurm-7"  # type: ignore[arg-type]
    renamed = SimpleNamespace(nodes={"node-a": SimpleNamespace(jobs={"named": {}})})
    assert _job_of(renamed, "mine", "slurm-7") == "named"  # type: ignore[arg-type]


def test_a_ranks_python_is_the_one_it_was_started_as_not_the_one_its_link_resolves_to(tmp_path: Path) -> None:
    """A virtual environment's python is a link to an interpreter without the environment's
    packages: the eye on another node runs as the rank was started."""
    from distmon.node.proc import interpreter_of

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    code = "import time; print('running', flush=True); time.sleep(30)"
    process = subprocess.Popen([str(venv / "python"), "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "running\n"  # its exec is over
        assert interpreter_of(process.pid) == str(venv / "python")
    finally:
        process.kill()
        process.wait()


def test_a_look_says_which_ranks_a_node_reached_found_but_never_heard() -> None:
    """Ranks 2-3 found on node-b that sent no report: the look has not seen the job."""
    monitor = Monitor(Detector())
    for rank in (0, 1, 2):
        monitor.ingest(wire.encode(report(rank, 4, t=T0)), T0)
    monitor.state.told.fared([looks.Reached("node-b", looks.SSH, looks.SEEN, ranks=(2, 3))], T0)
    monitor.state.told.fared([looks.Reached("node-c", looks.SSH, looks.UNREACHABLE, ranks=(4,))], T0)
    assert _unheard(monitor.state) == {3: "node-b"}
