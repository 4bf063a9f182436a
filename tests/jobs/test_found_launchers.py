"""Jobs whose launcher gives their ranks no ``RANK``, found and judged by ``distmon look``: torch's
``mp.spawn`` (PyTorch's DDP tutorial: each rank's index read off its stack) and Lightning's DDP
launcher (local rank 0 the process the user started, the others its children); and ranks that
wait as they do on a GPU (each all-reduce returns at once, the rank spins at a later sync point):
the ranks spinning there are the victims, the rank asleep the culprit, from outside and with the
hook alike. Rank 2 falls asleep in each (``tests/support/scripts/launched.py``)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.commands import TORCHRUN, distmon, free_port
from tests.support.paths import SCRIPTS
from tests.support.processes import kill_tree, start
from tests.support.recorder import recording
from tests.support.waiting import wait_until

LAUNCHED = SCRIPTS / "launched.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def started(tmp_path: Path, argv: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """The job of ``argv``, once rank 2 is asleep; killed after."""
    log = tmp_path / "job.log"
    with log.open("w") as out:
        job = start(
            argv, env={**ENV, "JOB_PORT": str(free_port()), **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: "injecting sleep" in log.read_text() or job.poll() is not None, 240, "rank 2 asleep")
        assert job.poll() is None, log.read_text()[-3000:]
        yield job
    finally:
        kill_tree(job)


def named(look: subprocess.CompletedProcess[str]) -> dict:
    """The look's answer: its one critical hang (a warning before it, while a loaded machine's
    stacks lag, may name what the look had seen so far)."""
    assert look.returncode == 1, look.stdout + look.stderr
    critical = [a for a in json.loads(look.stdout) if a["kind"] == "hang" and a["severity"] == "critical"]
    assert len(critical) == 1, look.stdout
    return critical[0]


def test_mp_spawns_ranks_are_read_off_their_stacks_and_a_gpus_waiters_are_victims(tmp_path: Path) -> None:
    with started(tmp_path, [sys.executable, str(LAUNCHED), "--launch", "spawn", "--gpu"]) as job:
        hang = named(distmon("look", "--pid", str(job.pid), "--json", "--seconds", "20", timeout=120))
        assert hang["ranks"] == [2], hang
        assert hang["summary"].startswith("rank 2 is asleep in clock_nanosleep; 3 ranks wait for it, in a sync point")
        assert "launched.py:" in hang["summary"] and " in sync, for up to " in hang["summary"]


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="lightning is not installed")
def test_lightnings_local_ranks_are_placed_by_their_tree(tmp_path: Path) -> None:
    with started(tmp_path, [sys.executable, str(LAUNCHED), "--launch", "lightning"]) as job:
        hang = named(distmon("look", "--pid", str(job.pid), "--json", "--seconds", "20", timeout=120))
        assert hang["ranks"] == [2] and hang["summary"].startswith("rank 2 is asleep in clock_nanosleep; 3 ranks"), hang


def test_with_the_hook_too_a_gpus_waiters_are_victims_not_culprits(tmp_path: Path) -> None:
    endpoint = f"ipc://{tmp_path}/hooked.sock"
    with recording(tmp_path / "hooked.distmon", endpoint) as hooked:
        argv = [TORCHRUN, "--nproc-per-node", "4", str(LAUNCHED), "--launch", "none", "--gpu", "--distmon"]
        with started(tmp_path, argv, {"DISTMON_ENDPOINT": endpoint, "DISTMON_INTERVAL": "1"}) as job:
            with ThreadPoolExecutor(1) as side:  # the look beside the hook's monitor: the spinning ranks burn CPU
                look = side.submit(distmon, "look", "--pid", str(job.pid), "--json", "--seconds", "20", timeout=120)
                hooked.wait_critical("hang", 60)
                found = named(look.result())
            hang = next(a for a in hooked.alerts() if a["kind"] == "hang")
    assert hang["ranks"] == [2] and found["ranks"] == [2], (hang, found)
