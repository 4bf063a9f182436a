"""A real Ray Train job (``TorchTrainer``, four CPU workers on gloo) with distmon attached in
its training function, as docs/deployment.md shows it: the training function runs in a thread
of each worker while the main thread runs Ray's event loop. A worker asleep before its
collective is named alone, asleep, at its frame in the training function; a clean run ends
'finished' although Ray kills its workers once the training function has returned.

Skipped where ``ray[train]`` is not installed (the CI's environment): a Ray cluster takes
half a minute to start on two cores. docs/deployment.md shows a run's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.commands import distmon
from tests.support.paths import SCRIPTS
from tests.support.processes import kill_tree, start
from tests.support.recorder import Recorder, alert_detail, recording
from tests.support.waiting import wait_until

pytest.importorskip("ray.train")

RAY_JOB = SCRIPTS / "ray_train_job.py"


@pytest.fixture
def ray_job(tmp_path: Path) -> Iterator[tuple[Recorder, list[str], dict[str, str]]]:
    """The recorder and how to start the job under it; Ray's processes stopped after."""
    endpoint = f"ipc://{tmp_path}/ranks.sock"
    with recording(tmp_path / "run.distmon", endpoint) as recorder:
        env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1"}
        env |= {"RAY_JOB_STORAGE": str(tmp_path / "results"), "DISTMON_TRACER_PID": str(recorder.process.pid)}
        yield recorder, [sys.executable, str(RAY_JOB)], env
    subprocess.run([Path(sys.executable).parent / "ray", "stop", "--force"], capture_output=True, timeout=60)


def test_a_worker_asleep_before_its_collective_is_named_at_its_frame(ray_job, tmp_path: Path) -> None:
    recorder, command, env = ray_job
    job = start([*command, "--fault", "sleep", "--name", "asleep"], env=env, cwd=tmp_path)
    try:
        recorder.wait_critical("hang", timeout=240)
        wait_until(lambda: "time.sleep(600)" in alert_detail(recorder.out, "hang"), 30, "the frame in the evidence")
        detail = alert_detail(recorder.out, "hang")
        alerts = recorder.alerts()  # the recorder stopped while the worker sleeps
    finally:
        kill_tree(job)
    hang = next(a for a in alerts if a["kind"] == "hang")
    assert hang["ranks"] == [2], hang
    assert "rank 2 is asleep in clock_nanosleep" in hang["summary"], hang
    assert "ray_train_job.py:43 in misbehave" in detail, detail
    assert {r.job for r in recorder.reports()} == {"ray-asleep"}


def test_found_without_the_hook_its_workers_ranks_are_read_off_rays_log(ray_job, tmp_path: Path) -> None:
    """Ray Train sets its workers' RANK in their own environment only: their ranks are read where
    Ray logs them, their training thread (not Ray's event loop) is the one judged."""
    _, command, env = ray_job
    log = tmp_path / "job.log"
    with log.open("w") as out:
        argv = [*command, "--fault", "sleep", "--name", "found", "--no-distmon"]
        job = start(argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "injecting sleep" in log.read_text(errors="replace"), 240, "rank 2 asleep")
        look = distmon("look", "--job", "ray-found", "--json", timeout=90)
    finally:
        kill_tree(job)
    assert look.returncode == 1, look.stdout + look.stderr
    hang = next(a for a in json.loads(look.stdout) if a["kind"] == "hang")
    assert hang["ranks"] == [2] and "rank 2 is asleep in clock_nanosleep" in hang["summary"], hang
    assert "ray_train_job.py:43 in misbehave" in hang["detail"], hang["detail"]


def test_a_clean_run_ends_finished_when_ray_ends_its_workers(ray_job, tmp_path: Path) -> None:
    recorder, command, env = ray_job
    job = start([*command, "--name", "clean"], env=env, cwd=tmp_path)
    try:
        assert job.wait(240) == 0
    finally:
        kill_tree(job)
    last = {r.rank: r for r in recorder.reports()}
    assert sorted(last) == [0, 1, 2, 3]
    assert all(r.exit is not None and r.exit.how == "finished" for r in last.values()), last
    alerts = recorder.alerts()
    assert not [a for a in alerts if a["severity"] == "critical"], alerts
