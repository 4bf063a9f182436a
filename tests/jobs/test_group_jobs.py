"""Several process groups in real gloo jobs under torchrun.

Two launches back every assertion: a 4-rank job with overlapping groups whose counts every
rank must report exactly, and an 8-rank tensor x data parallel job (examples/parallel.py)
whose rank 5 stalls before a tensor-parallel all-reduce and, later, whose ranks 0 and 1
deadlock across two groups, recorded by a real `distmon record`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from distmon.monitor.recording.format import AlertEvent
from distmon.monitor.recording.reader import read_recording
from distmon.wire import Report, expand_runs
from tests.support.alerts import is_root_hang
from tests.support.listener import Listener
from tests.support.paths import EXAMPLES, SCRIPTS
from tests.support.recorder import recording
from tests.support.scripts.many_groups_plan import BARRIERS, GROUPS, MESSAGES

MANY_GROUPS = SCRIPTS / "many_groups.py"
PARALLEL = EXAMPLES / "parallel.py"
INJECTED = re.compile(r"\[parallel\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")


def test_every_group_reports_its_own_counts_on_every_rank(torchrun: Callable, endpoint: str) -> None:
    with Listener(endpoint) as listener, torchrun(4, endpoint=endpoint, script=MANY_GROUPS) as job:
        code = job.wait(timeout=120)
    assert code == 0, job.output[-3000:]
    final: dict[int, Report] = {}
    for report in listener.snapshot():
        if report.groups:
            final[report.rank] = report
    assert sorted(final) == [0, 1, 2, 3]
    for rank, report in final.items():
        seen = {(g.desc or "", tuple(expand_runs(g.ranks))): g for g in report.groups}
        expected = {("default_pg", (0, 1, 2, 3)): BARRIERS}
        for desc, (memberships, count) in GROUPS.items():
            for ranks in memberships:
                if rank in ranks:
                    expected[(desc, tuple(ranks))] = count
        assert {key: (g.enqueued, g.completed) for key, g in seen.items()} == {
            key: (count, count) for key, count in expected.items()
        }, f"rank {rank}"
        assert len({g.id for g in report.groups}) == len(report.groups)
        assert all(g.backend == "gloo" and g.size == len(expand_runs(g.ranks)) for g in report.groups)
    names = {(g.desc, tuple(expand_runs(g.ranks))): g.id for r in final.values() for g in r.groups}
    assert len(set(names.values())) == len(names), "one name per group, the same on every member"
    for rank, report in final.items():
        desc = {g.id: g.desc or "" for g in report.groups}
        channels = {(desc[c.group], c.peer, c.dir): (c.posted, c.completed, c.pending) for c in report.p2p}
        expected: dict[tuple[str, int, str], int] = {}
        for group, messages in MESSAGES.items():
            for src, dst in messages:
                if rank in (src, dst):
                    key = (group, dst, "send") if rank == src else (group, src, "recv")
                    expected[key] = expected.get(key, 0) + 1
        assert channels == {key: (n, n, None) for key, n in expected.items()}, f"rank {rank}"


@pytest.fixture(scope="module")
def parallel_run(torchrun: Callable, new_endpoint: Callable[[], str], tmp_path_factory) -> tuple[list[dict], Path]:
    """8 ranks, TP 2 x DP 4: rank 5 stalls 30 s at step 20, then ranks 0 and 1 deadlock."""
    args = ["--tp", "2", "--steps", "200", "--distmon", "--timeout", "300"]
    args += ["--stall-rank", "5", "--stall-step", "20", "--stall-seconds", "30"]
    args += ["--deadlock-rank", "0", "--deadlock-step", "60"]
    for attempt in (1, 2):
        endpoint = new_endpoint()
        out = tmp_path_factory.mktemp("parallel") / "run.distmon"
        with recording(out, endpoint) as recorder, torchrun(8, *args, endpoint=endpoint, script=PARALLEL) as job:
            try:  # under load the stall at step 20 comes a minute or two in; the deadlock follows it soon
                recorder.wait_critical("hang", timeout=150 * attempt, job=job)
            except AssertionError as e:
                # ci200, ci211, ci219, ci234: no critical hang in 150 s, rarely, why not yet known (the stall
                # was 15 s then, which a pace learned under load may outlast): once more, the words kept
                if attempt == 2:
                    raise
                # a warning, not a print: pytest shows it with a test that passed, where CI keeps it
                warnings.warn(f"the 8-rank job's first attempt heard nothing: {e}", stacklevel=1)
                recorder.kill()
                continue
            recorder.wait_critical("deadlock", timeout=80, job=job)
            return recorder.alerts(), out  # stopped before the job is killed: its ranks' end is the test's
    raise AssertionError("unreachable")


def hang_updates(recording: Path, ranks: list[int]) -> list[AlertEvent]:
    """Every event of the hang alerts naming ``ranks``, in the recording's order."""
    _, records = read_recording(str(recording))
    return [r for r in records if isinstance(r, AlertEvent) and r.alert.kind == "hang" and r.alert.ranks == ranks]


@pytest.fixture(scope="module")
def parallel_job(parallel_run: tuple[list[dict], Path]) -> list[dict]:
    return parallel_run[0]


@pytest.fixture(scope="module")
def parallel_job_recording(parallel_run: tuple[list[dict], Path]) -> Path:
    return parallel_run[1]


def test_a_stalled_rank_is_named_alone_with_its_waiting_peers(parallel_job, parallel_job_recording) -> None:
    alerts = parallel_job
    stall = [a for a in alerts if is_root_hang(a)]
    assert [a["ranks"] for a in stall] == [[5]], [a["summary"] for a in alerts]
    detail = stall[0]["detail"]
    # as rank 5 comes back, its tp peer moves on before rank 5's next report: the last update
    # may no longer list it, the updates while it waited do
    details = [e.alert.detail for e in hang_updates(parallel_job_recording, [5])]
    assert any("rank 4 in collective" in d and "(tp, ranks 4-5)" in d for d in details), details[-1]
    assert "(dp, ranks" in detail, "the data-parallel groups waiting for rank 4 are evidence"
    # its own stack while it stood; the last update, as rank 5 comes back to work, may say it makes progress instead
    assert any("parallel.py" in d and "time.sleep" in d for d in details), f"rank 5's own stack: {details[-1]}"
    assert not [a for a in alerts if a["severity"] == "critical" and a["kind"] != "hang"], alerts


def test_a_cross_group_deadlock_is_named_as_one(parallel_job) -> None:
    alerts = parallel_job
    (cycle,) = [a for a in alerts if "deadlock" in a["summary"]]
    assert cycle["kind"] == "hang" and cycle["ranks"] == [0, 1]
    assert "barrier" in cycle["detail"] and "all_reduce" in cycle["detail"]
