"""Ranks started one per process by ``srun`` or ``mpirun``, without torchrun, under
``distmon run``: each rank finds its rank, world and local rank in its launcher's variables
before ``init_process_group`` (its first report comes before it), the job is named after the
launcher's job, and a stalled rank is named as under torchrun.

No Slurm or MPI here: :mod:`tests.support.launchers` starts the processes with the variables
those launchers set, and no ``RANK``. The script reads its rank as a user's does under them
(``examples/train.py``'s ``launched_as``), ``MASTER_ADDR`` and ``MASTER_PORT`` set by the job.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from distmon.monitor.recording.format import received
from distmon.monitor.recording.reader import read_recording
from distmon.wire import decode
from tests.support import launchers
from tests.support.commands import distmon, free_port
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, recorded_run
from tests.support.waiting import wait_until

JOB_NAMES = {"srun": "slurm-4242", "mpirun": "mpi-prterun-vm-4242@1"}


@pytest.mark.parametrize("launcher", ["srun", "mpirun"])
def test_a_hang_among_ranks_started_by_the_launcher_names_the_rank(tmp_path: Path, launcher: str) -> None:
    out = tmp_path / "run.distmon"
    path = f"{launchers.install(tmp_path / 'bin', 4242)}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "1"}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    job = [launcher, "-n", "3", sys.executable, str(TRAIN), "--fault", "hang", "--fault-rank", "2"]
    job += ["--workers", "0", "--timeout", "120"]
    process, lines, reader = recorded_run(out, job, env)
    try:
        wait_until(lambda: any(" hang: " in line for line in lines), 150, "a hang alert")
        process.send_signal(signal.SIGINT)
        status = process.wait(60)
    except AssertionError as e:
        raise AssertionError(f"{e}; distmon said:\n{''.join(lines)[-3000:]}") from None
    finally:
        kill_tree(process)
    reader.join(5)
    assert status != 0
    report = distmon("report", out, "--json")
    hangs = [a for a in json.loads(report.stdout) if a["kind"] == "hang"]
    assert hangs and hangs[0]["ranks"] == [2], report.stdout
    reports = [decode(frame) for _, frame in received(read_recording(str(out))[1])]
    first = {r.pid: r for r in reversed(reports)}.values()  # each rank's first, as early as torch's import
    assert sorted((r.rank, r.world, r.local_rank) for r in first) == [(0, 3, 0), (1, 3, 1), (2, 3, 2)]
    assert {r.job for r in reports} == {JOB_NAMES[launcher]}
