"""A job started without distmon, found and judged from outside: real ranks, each fault named as
the hook names it.

One torchrun job of 4 gloo ranks carries three faults in turn (rank 2 asleep, rank 1 holding
the GIL in a C regex, rank 3 stopped by SIGSTOP), each lasting seconds before the job trains
on. It runs with the hook, reporting to one ``distmon record``, while a second ``distmon record
--find`` finds the same ranks from outside: side by side, both must name the same culprit in
the same words. ``distmon look`` answers during the stop. Ranks launched one per process by
``srun`` (no agent, SLURM variables) and by a real ``mpirun`` are found and named by
``distmon look``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distmon.monitor.recording.format import AlertEvent
from distmon.monitor.recording.reader import read_recording
from tests.support import launchers
from tests.support.commands import TORCHRUN, distmon, free_port
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.recorder import recording
from tests.support.waiting import wait_until

ASLEEP, GIL, STOPPED = 40, 90, 140
FAULTS = [f"hang@{ASLEEP}:2:12", f"regex@{GIL}:1:8", f"stop@{STOPPED}:3:20"]
"""A rank found from outside is named once the eye has seen its stack stand still over three
looks, which three test files at once on 2 cores stretch past 6 s: the sleep lasts 12 s, the
GIL 8 s of its CPU (longer by the clock on a loaded machine), the stop 20 s (``distmon look``
starts as it begins, and must find the job's ranks too)."""
CULPRITS = {"hang": 2, "regex": 1, "stop": 3}
DOING = {"hang": "is asleep", "regex": "holds the GIL", "stop": "is stopped (SIGSTOP)"}
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "1"}


@dataclass
class SideBySide:
    hooked: list[dict]
    found: list[dict]
    said: dict[int, set[str]]
    """What each of the hook's hang alerts naming one rank said it does, at each of its updates
    (an alert's words follow the rank: once it trains on, it is working)."""
    look: subprocess.CompletedProcess[str]
    log: str
    named: list[AlertEvent]
    """Every change of the alerts the eye's recorder raised, as it said them live: the report
    gives each alert's last form, which may be the moment its incident ended."""


def doings(recording: Path) -> dict[int, set[str]]:
    """What the hang alerts naming one rank said that rank does, update by update."""
    said: dict[int, set[str]] = {}
    for e in alert_events(recording):
        if e.alert.kind == "hang" and len(e.alert.ranks) == 1:
            said.setdefault(e.alert.ranks[0], set()).add(e.alert.summary.split("; ")[0])
    return said


def alert_events(recording: Path) -> list[AlertEvent]:
    """Every change of the recording's alerts, as its monitor said them live."""
    _, records = read_recording(str(recording))
    return [r for r in records if isinstance(r, AlertEvent)]


def injected(log: Path, fault: str) -> bool:
    return f"injecting {fault} at step" in log.read_text()


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SideBySide]:
    logs = tmp_path_factory.mktemp("found")
    hooked_end, found_end = f"ipc://{logs}/hooked.sock", f"ipc://{logs}/found.sock"
    train = [str(TRAIN), "--distmon", "--workers", "0", "--timeout", "120", "--steps", str(STOPPED + 40)]
    train += [arg for fault in FAULTS for arg in ("--fault", fault)]
    log = logs / "job.log"
    with recording(logs / "hooked.distmon", hooked_end) as hooked:
        with log.open("w") as out:
            job = start([TORCHRUN, "--nproc-per-node", "4", *train], env={**ENV, "DISTMON_ENDPOINT": hooked_end},
                        stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            with recording(logs / "found.distmon", found_end, "--find", "--pid", str(job.pid)) as found:
                wait_until(lambda: injected(log, "stop"), 240, "the job to stop rank 3")
                look = distmon("look", "--pid", str(job.pid), "--seconds", "10", "--json", timeout=60)
                assert job.wait(240) == 0, log.read_text()[-3000:]
                alerts = hooked.alerts(), found.alerts()
                yield SideBySide(*alerts, doings(hooked.out), look, log.read_text(), alert_events(found.out))
        finally:
            kill_tree(job)


def _named(alerts: list[dict], rank: int) -> dict:
    mine = [a for a in alerts if a["kind"] == "hang" and a["ranks"] == [rank]]
    assert mine, json.dumps(alerts, indent=1)[-3000:]
    return mine[0]


@pytest.mark.parametrize("fault", list(CULPRITS))
def test_found_from_outside_the_culprit_is_named_in_the_hooks_words(side_by_side: SideBySide, fault: str) -> None:
    """The hook names the rank alone, saying what it does; from outside, on a loaded machine whose
    eye looks seconds behind, the rank is among those a hang alert names (alone, or with ranks it
    saw move), found without the hook."""
    rank = CULPRITS[fault]
    _named(side_by_side.hooked, rank)
    said = side_by_side.said[rank]
    assert any(words.startswith(f"rank {rank} {DOING[fault]}") for words in said), said
    found = [e.alert for e in side_by_side.named if e.alert.kind == "hang" and rank in e.alert.ranks]
    assert found and all("found without the hook" in a.detail for a in found), side_by_side.found


def test_found_from_outside_nothing_else_is_said(side_by_side: SideBySide) -> None:
    """No page naming a rank that did nothing wrong, no rank lost when the job ends, no memory
    growth at start-up: what the eye saw move is at most a warning that says so."""
    innocent = [
        a for a in side_by_side.found if a["severity"] == "critical" and set(a["ranks"]) - set(CULPRITS.values())
    ]
    assert innocent == [], innocent
    doubts = [a for a in side_by_side.found if len(a["ranks"]) > 1]
    assert all(a["severity"] == "warning" and "making progress" in a["detail"] for a in doubts), doubts
    about_the_job = {a["kind"] for a in side_by_side.found if a["kind"] != "monitor_behind"}
    assert about_the_job == {"hang"}  # a loaded host may leave the monitor itself behind: it says so, naming none


def test_distmon_look_names_the_stopped_rank_and_says_so_by_its_exit_code(side_by_side: SideBySide) -> None:
    look = side_by_side.look
    assert look.returncode == 1, look.stderr
    alerts = json.loads(look.stdout)
    assert [a["ranks"] for a in alerts if a["kind"] == "hang"] == [[3]]
    assert "is stopped (SIGSTOP)" in alerts[0]["summary"]


def _look_at(job: subprocess.Popen[bytes], log: Path, fault: str) -> subprocess.CompletedProcess[str]:
    try:
        wait_until(lambda: injected(log, fault), 180, f"the job to inject {fault}")
        return distmon("look", "--pid", str(job.pid), "--seconds", "10", timeout=60)
    finally:
        kill_tree(job)


def test_ranks_started_by_srun_are_found_and_a_rank_in_another_collective_named(tmp_path: Path) -> None:
    path = f"{launchers.install(tmp_path / 'bin', 4343)}{os.pathsep}{ENV['PATH']}"
    env = {**ENV, "PATH": path, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    log = tmp_path / "job.log"
    argv = ["srun", "-n", "3", sys.executable, str(TRAIN), "--workers", "0", "--timeout", "120"]
    argv += ["--fault", "extra-collective", "--fault-rank", "1", "--fault-step", "20"]
    with log.open("w") as out:
        job = start(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    look = _look_at(job, log, "extra-collective")
    assert look.returncode == 1, look.stdout + look.stderr
    assert re.search(
        r"FIRST CAUSE \(\+[\d.]+s\): divergence: rank 1 in barrier at \S+train.py:\d+ in inject", look.stdout
    )
    assert "Job slurm-4343: 3 ranks on 1 host, found without the hook" in look.stdout


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI is not installed (apt install openmpi-bin)")
def test_ranks_started_by_mpirun_are_found_and_the_rank_asleep_named(tmp_path: Path) -> None:
    env = {**ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    log = tmp_path / "job.log"
    argv = ["mpirun", "--oversubscribe", "-np", "3", sys.executable, str(TRAIN), "--workers", "0"]
    argv += ["--timeout", "120", "--fault", "hang", "--fault-rank", "2", "--fault-step", "20"]
    if os.geteuid() == 0:
        argv[1:1] = ["--allow-run-as-root"]
    with log.open("w") as out:
        job = start(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    look = _look_at(job, log, "hang")
    assert look.returncode == 1, look.stdout + look.stderr
    assert "hang: rank 2 is asleep in clock_nanosleep; 2 ranks wait for it" in look.stdout, look.stdout
