"""Finding a job's ranks from outside (:mod:`distmon.node.finder`), on real processes: launched
with the variables torchrun, srun and mpirun give, a launcher above them, a DataLoader worker
below one, two jobs side by side."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distmon.node.finder import Finder, Found
from tests.support.waiting import wait_until

Env = dict[str, str]
Launch = Callable[..., int]
RANK = textwrap.dedent(
    """
    import os, subprocess, sys, time
    if os.environ.get("WITH_WORKER") == os.environ.get("RANK", os.environ.get("SLURM_PROCID")):
        worker = "open('/proc/self/comm', 'w').write('pt_data_worker'); import time; time.sleep(60)"
        subprocess.Popen([sys.executable, "-c", worker])
    time.sleep(60)
    """
)
LAUNCHER = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    ranks = [subprocess.Popen([sys.executable, sys.argv[1]], env={**os.environ, **env})
             for env in json.loads(sys.argv[2])]
    time.sleep(60)
    """
)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """``launch(name, envs)``: a launcher script called ``name`` starting a rank per map of
    variables; every process it started is killed after the test."""
    started: list[subprocess.Popen[bytes]] = []
    (tmp_path / "rank.py").write_text(RANK)

    def start(
        name: str, envs: list[dict[str, str]], worker: int | None = None, own: dict[str, str] | None = None
    ) -> int:
        script = tmp_path / name
        script.write_text(LAUNCHER)
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID")}
        env["WITH_WORKER"] = str(worker)
        env.update(own or {})
        argv = [sys.executable, str(script), str(tmp_path / "rank.py"), json.dumps(envs)]
        process = subprocess.Popen(argv, env=env, start_new_session=True)
        started.append(process)
        return process.pid

    yield start
    for process in started:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def torchrun_env(rank: int, world: int, run: str) -> dict[str, str]:
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "TORCHELASTIC_RUN_ID": run,
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
    }  # fmt: skip


def srun_env(rank: int, world: int) -> dict[str, str]:
    return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(rank), "SLURM_JOB_ID": "77"}


def scan_until(finder: Finder, ready: Callable[[Found], object]) -> Found:
    found: list[Found] = []

    def scanned() -> bool:
        found[:] = [finder.scan()]
        return bool(ready(found[0]))

    try:
        wait_until(scanned, 20, "the processes to start")
    except AssertionError as e:
        raise AssertionError(f"{e}; found {found[0].jobs if found else None}") from None
    return found[0]


def test_the_ranks_of_a_torchrun_job_are_found_with_their_launcher_and_workers(launch) -> None:
    agent = launch("torchrun", [torchrun_env(r, 2, "run-a") for r in range(2)], worker=1)
    finder = Finder()
    found = scan_until(finder, lambda f: len(f.jobs.get("run-a", [])) == 2 and f.jobs["run-a"][1].workers)
    ranks = found.jobs["run-a"]
    assert [(r.rank, r.world, r.local_rank, r.launcher) for r in ranks] == [(0, 2, 0, agent), (1, 2, 1, agent)]
    assert not ranks[0].workers and len(ranks[1].workers) == 1  # the worker, with RANK=1, is no rank
    assert found.job_of(agent, finder.parents) == "run-a" and found.job_of(ranks[1].pid, finder.parents) == "run-a"


def test_two_jobs_on_one_host_are_two_jobs(launch) -> None:
    launch("torchrun", [torchrun_env(r, 2, "run-a") for r in range(2)])
    srun = launch("srun", [srun_env(r, 3) for r in range(3)])
    finder = Finder()
    found = scan_until(finder, lambda f: len(f.jobs.get("run-a", [])) == 2 and len(f.jobs.get("slurm-77", [])) == 3)
    assert [r.rank for r in found.jobs["slurm-77"]] == [0, 1, 2]
    assert found.job_of(srun, finder.parents) == "slurm-77"


def test_a_python_launcher_with_a_rank_of_its_own_is_no_rank(launch) -> None:
    """``srun torchrun ...``: torchrun's agent inherits SLURM_PROCID, its children have RANK."""
    envs = [torchrun_env(r, 2, "run-b") for r in range(2)]
    agent = launch("torchrun", envs, own=srun_env(0, 1))
    finder = Finder()

    def workers(found: Found) -> bool:  # before its children start, the agent alone holds a rank: a rank then
        ranks = found.jobs.get("slurm-77", [])
        return len(ranks) == 2 and all(r.pid != agent for r in ranks)

    found = scan_until(finder, workers)
    assert {r.launcher for r in found.jobs["slurm-77"]} == {agent}


LIGHTNING = textwrap.dedent(
    """
    import os, subprocess, sys, time
    if "LOCAL_RANK" not in os.environ:  # local rank 0, as the user started it: its children are the others
        for local in (1, 2):
            env = {**os.environ, "LOCAL_RANK": str(local), "NODE_RANK": "0", "WORLD_SIZE": "3",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511"}
            subprocess.Popen([sys.executable, *sys.argv], env=env)
    time.sleep(60)
    """
)
BY_ARGV = textwrap.dedent(
    """
    import os, subprocess, sys, time
    if "--rank" not in sys.argv:
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29512"}
        for r in range(3):
            subprocess.Popen([sys.executable, sys.argv[0], "--rank", str(r), "--world-size", "3"], env=env)
    time.sleep(60)
    """
)
SPAWNING = textwrap.dedent(
    """
    import multiprocessing, time
    if __name__ == "__main__":
        for _ in range(3):
            multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,)).start()
        time.sleep(60)
    """
)


@pytest.fixture
def script(tmp_path: Path) -> Iterator[Callable[[str, str], int]]:
    """``script(name, text)``: a Python script of ``text`` started as ``name``, with every
    process it starts killed after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def run(name: str, text: str) -> int:
        (tmp_path / name).write_text(text)
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
        process = subprocess.Popen([sys.executable, str(tmp_path / name)], env=env, start_new_session=True)
        started.append(process)
        return process.pid

    yield run
    for process in started:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_lightnings_local_ranks_are_placed_by_the_tree_the_first_the_process_the_user_started(script) -> None:
    user = script("fit.py", LIGHTNING)
    found = scan_until(Finder(), lambda f: len(f.jobs.get("127.0.0.1:29511", [])) == 3)
    ranks = found.jobs["127.0.0.1:29511"]
    assert [(r.rank, r.world, r.local_rank, r.read_from) for r in ranks] == [
        (0, 3, 0, "process tree"), (1, 3, 1, "process tree"), (2, 3, 2, "process tree")
    ]  # fmt: skip
    assert ranks[0].pid == user


def test_ranks_given_theirs_on_the_command_line_are_found_by_it(script) -> None:
    launcher = script("launch.py", BY_ARGV)
    found = scan_until(Finder(), lambda f: len(f.jobs.get("127.0.0.1:29512", [])) == 3)
    ranks = found.jobs["127.0.0.1:29512"]
    assert [(r.rank, r.world, r.read_from, r.launcher) for r in ranks] == [
        (r, 3, "command line", launcher) for r in range(3)
    ]
    assert ranks[0].store == ("127.0.0.1", 29512)


def test_processes_spawned_by_multiprocessing_are_ranks_to_read_off_their_stacks(script) -> None:
    """``mp.spawn``'s ranks carry no rank anywhere their launcher reaches: found with none, their
    world the number spawned; the script that spawned them is no rank."""
    parent = script("spawns.py", SPAWNING)
    found = scan_until(Finder(), lambda f: len(f.jobs.get(f"{socket.gethostname()}:{parent}", [])) == 3)
    ranks = found.jobs[f"{socket.gethostname()}:{parent}"]
    assert all(r.rank is None and r.spawned and r.world == 3 and r.launcher == parent for r in ranks)


def test_a_python_launcher_naming_the_store_is_no_rank(launch) -> None:
    """A launcher written in Python whose own environment names the job's store (``srun``'s
    stand-in, a script of the user's) started ranks: it is none of them, nor a job of its own."""
    store = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29513"}
    agent = launch("launch.py", [srun_env(r, 2) for r in range(2)], own=store)
    finder = Finder()
    found = scan_until(finder, lambda f: len(f.jobs.get("slurm-77", [])) == 2)
    assert all(r.pid != agent for ranks in found.jobs.values() for r in ranks), found.jobs
    assert found.job_of(agent, finder.parents) == "slurm-77"
