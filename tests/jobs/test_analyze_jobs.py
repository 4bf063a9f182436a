"""``distmon analyze`` on the Flight Recorder dumps of real gloo jobs that hung here
(tests/support/scripts/fr_hang.py, 4 ranks under torchrun, torch's own dumps): each names the root alone,
and on the job watched live as well, the live monitor and ``analyze`` name the same rank."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.commands import distmon
from tests.support.paths import SCRIPTS
from tests.support.recorder import Recorder, recording

JOB = SCRIPTS / "fr_hang.py"
CULPRIT = 1
RAISED = re.compile(r"CRITICAL hang: rank (\d+)\b.*?(\d+) ranks wait for it")
"""The live monitor's hang line: the rank named, and how many wait for it (its words for the
rank may differ: live, it can look at the process, which a dump cannot)."""


def hung_job(torchrun: Callable, endpoint: str, out: Path, fault: str, recorder: Recorder | None = None) -> Path:
    """Run the job until every rank stands in its hang (and the live monitor, if any, has
    raised it), then have each rank dump; returns the dumps' prefix."""
    prefix = out / "nccl_trace_rank_"
    args = ["--prefix", str(prefix), "--fault", fault, "--culprit", str(CULPRIT)]
    with torchrun(4, *args, *(["--distmon"] if recorder else []), endpoint=endpoint, script=JOB) as job:
        arrived = [Path(f"{prefix}{r}.at") for r in range(4)]
        deadline = time.monotonic() + 120
        while not all(a.exists() for a in arrived):
            assert time.monotonic() < deadline and job.process.poll() is None, job.output[-3000:]
            time.sleep(0.1)
        if recorder is not None:
            recorder.wait_critical("hang", timeout=120, job=job)
        Path(f"{prefix}go").touch()
        job.wait(timeout=120)
    for marker in [*arrived, Path(f"{prefix}go")]:
        marker.unlink()
    return prefix


def test_a_stalled_rank_is_named_alone_and_the_live_monitor_agrees(
    torchrun: Callable, endpoint: str, tmp_path: Path
) -> None:
    with recording(tmp_path / "live.distmon", endpoint) as recorder:
        prefix = hung_job(torchrun, endpoint, tmp_path, "stall", recorder)
        said = recorder.stderr()
        raised = RAISED.search(said)  # as raised: the teardown rewrites it
        recorder.stop()
    (tmp_path / "live.distmon").unlink()
    recorder.log.unlink()
    done = distmon("analyze", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["culprits"] == [CULPRIT], found["summary"]
    assert raised is not None, said[-3000:]
    assert [int(raised.group(1))] == found["culprits"], raised.group(0)
    assert f"{raised.group(2)} ranks wait for it" in found["summary"], raised.group(0)
    assert found["missing"] == []
    ranks = {r["rank"]: r for r in found["ranks"]}
    pending = ranks[0]["oldest_pending"]
    assert (pending["op"], pending["seq"], pending["state"]) == ("all_reduce", 3, "scheduled")
    assert ranks[CULPRIT]["oldest_pending"] is None
    assert ranks[CULPRIT]["last_completed"]["op"] == "all_reduce"
    tp = next(g for g in ranks[0]["groups"] if g["desc"] == "tp")
    assert (tp["ranks"], tp["enqueued"], tp["completed"], tp["op"]) == ("0-1", 3, 2, "all_reduce")
    assert Path(f"{prefix}0").exists()


@pytest.mark.parametrize("fault", ["busy", "nosend"])
def test_a_rank_in_its_own_code_or_a_stage_that_never_sends_is_named_alone(
    torchrun: Callable, endpoint: str, tmp_path: Path, fault: str
) -> None:
    hung_job(torchrun, endpoint, tmp_path, fault)
    done = distmon("analyze", str(tmp_path))
    assert done.returncode == 0, done.stderr
    headline = next(line for line in done.stdout.splitlines() if line.startswith("CULPRIT"))
    assert headline.startswith(f"CULPRIT rank {CULPRIT}: rank {CULPRIT} holds up the job"), done.stdout
    assert (
        f"rank {CULPRIT}: CULPRIT, its host stopped enqueuing while its peers went on; nothing in flight" in done.stdout
    )
    assert "rank 0: waits in collective #3 (all_reduce) of group" in done.stdout


def test_a_killed_rank_has_no_dump_and_is_named_from_the_others(
    torchrun: Callable, endpoint: str, tmp_path: Path
) -> None:
    prefix = hung_job(torchrun, endpoint, tmp_path, "kill")
    dumps = sorted(str(p) for p in tmp_path.iterdir() if p.name.startswith(prefix.name))
    assert len(dumps) == 3
    done = distmon("analyze", *dumps, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["culprits"] == [CULPRIT]
    assert found["missing"] == [{"rank": CULPRIT, "reason": "no file"}]
    assert "never reported" in found["alerts"][0]["detail"]
