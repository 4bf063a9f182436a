"""Finding a job's ranks from outside (:mod:`distmon.node.finder`), on real processes: launched
with the variables torchrun, srun and mpirun give, a launcher above them, a DataLoader worker
below one, two jobs side by side."""

from __future__ import annotations

import json
import os
import signal
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
    found = scan_until(finder, lambda f: len(f.jobs.get("slurm-77", [])) == 2)
    assert {r.launcher for r in found.jobs["slurm-77"]} == {agent}
    assert all(r.pid != agent for r in found.jobs["slurm-77"])
