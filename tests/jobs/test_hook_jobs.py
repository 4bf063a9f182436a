"""The hook in real multi-rank gloo jobs under torchrun, heard by a real ZeroMQ listener.

Three launches back every assertion: a 3-rank job whose rank 1 pauses at step 10 (what
a paused rank and its waiting peers report, then the recovery and a clean finish), a
2-rank job whose DataLoader worker is killed, and a 2-rank job whose rank raises.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import socket
from collections.abc import Callable
from dataclasses import dataclass

import psutil
import pytest

from distmon.wire import GroupStatus, Report
from tests.support.listener import Listener

RANKS = 3
STEPS = 30
PAUSE_STEP = 10
PAUSED_RANK = 1
INTERVAL = 0.5


@dataclass
class PausedJob:
    exit_code: int
    reports: dict[int, list[Report]]
    children: dict[int, set[int]]
    """Child processes of each rank, read from /proc while the job was paused."""

    def paused(self, rank: int) -> list[Report]:
        """The rank's reports of a stall once training began (a slow start is a stall too)."""
        return [r for r in self.reports[rank] if is_paused(r)]


def is_paused(report: Report) -> bool:
    return report.stalled_since is not None and report.steps > 0


def every_rank(condition: Callable[[Report], object]) -> Callable[[list[Report]], bool]:
    return lambda reports: {r.rank for r in reports if condition(r)} == set(range(RANKS))


def world_group(report: Report) -> GroupStatus:
    (group,) = report.groups
    return group


def child_pids(pid: int) -> set[int]:
    try:
        return {child.pid for child in psutil.Process(pid).children()}
    except psutil.NoSuchProcess:
        return set()


@pytest.fixture(scope="module")
def paused_job(torchrun, new_endpoint) -> PausedJob:
    endpoint = new_endpoint()
    args = ["--steps", str(STEPS), "--step-time", "0.05", "--workers", "2", "--fault", "hang"]
    args += ["--fault-rank", str(PAUSED_RANK), "--fault-step", str(PAUSE_STEP)]
    args += ["--hang-seconds", "5"]
    with Listener(endpoint) as listener, torchrun(RANKS, *args, endpoint=endpoint) as job:
        all_stalled = listener.wait_for(every_rank(is_paused), timeout=90)
        latest = {r.rank: r for r in listener.snapshot()}
        children = {rank: child_pids(report.pid) for rank, report in latest.items()}
        exit_code = job.wait(timeout=90)
        listener.wait_for(every_rank(lambda r: r.exit), timeout=30)
    assert all_stalled, f"the pause was not reported by every rank:\n{job.output[-3000:]}"
    return PausedJob(exit_code, listener.by_rank(), children)


def test_every_rank_reports_its_identity(paused_job):
    firsts = {rank: reports[0] for rank, reports in paused_job.reports.items()}
    assert sorted(firsts) == list(range(RANKS))
    assert len({r.job for r in firsts.values()}) == 1, "one job id, with no configuration"
    assert len({r.pid for r in firsts.values()}) == RANKS
    torch_version = importlib.metadata.version("torch")
    for rank, report in firsts.items():
        assert (report.world, report.local_rank, report.host) == (
            RANKS,
            rank,
            socket.gethostname(),
        )
        assert report.torch == torch_version
        assert report.interval == INTERVAL
        assert report.reporter not in (None, report.pid, report.tid), "distmon's own thread, for its wakes"
    during = [r for reports in paused_job.reports.values() for r in reports if not r.exit]
    assert {r.backend for r in during} == {"gloo"}


def test_reports_arrive_every_interval_without_loss(paused_job):
    for reports in paused_job.reports.values():
        numbers = [r.n for r in reports]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        gaps = [b.t - a.t for a, b in itertools.pairwise(reports)]
        assert max(gaps) < 6 * INTERVAL  # a reporting thread on a loaded machine waits for a CPU (1.6 s seen)


def test_steps_and_forwards_are_counted_to_a_clean_exit(paused_job):
    assert paused_job.exit_code == 0
    for reports in paused_job.reports.values():
        last = reports[-1]
        assert last.exit is not None and last.exit.how == "clean"
        assert last.exception is None
        assert (last.steps, last.forwards) == (STEPS, STEPS)


def test_step_time_statistics_include_the_pause(paused_job):
    for reports in paused_job.reports.values():
        stats = reports[-1].step_time
        assert stats is not None and stats.n == STEPS - 1
        assert 0.05 <= stats.p50 < stats.max
        assert stats.max >= 4, "every rank's step 10 lasted the 5 s pause"
        assert reports[-1].last_step_t is not None


def test_ranks_paused_at_the_same_step_and_collective(paused_job):
    paused = {rank: paused_job.paused(rank) for rank in range(RANKS)}
    assert {r.steps for reports in paused.values() for r in reports} == {PAUSE_STEP}
    completed = {world_group(r).completed for reports in paused.values() for r in reports}
    assert len(completed) == 1, "every rank completed the same collectives"
    assert completed.pop() > PAUSE_STEP, "DDP's gradient all-reduces advance the sequence"


def test_waiting_ranks_name_the_collective_in_flight(paused_job):
    for rank in set(range(RANKS)) - {PAUSED_RANK}:
        last_paused = paused_job.paused(rank)[-1]
        group = world_group(last_paused)
        assert group.enqueued == group.completed + 1
        assert group.op == "all_reduce"
        assert group.since is not None and last_paused.t - group.since > 2
    for report in paused_job.paused(PAUSED_RANK):
        group = world_group(report)
        assert (group.enqueued, group.op) == (group.completed, None)


def test_sequence_numbers_advance_alike_across_ranks(paused_job):
    """Between steps (a forward per step, nothing in flight) every rank has completed the
    same collectives at the same step: all such reports lie on one line, seq = a + k * step,
    k the gradient all-reduces DDP issues per step. DDP rebuilds its buckets with an extra
    broadcast during the second step, so the line starts at step 2; the epoch ends with a
    barrier after the last step, so it ends before that step."""
    between_steps = [
        (r.steps, world_group(r).completed, r.rank)
        for reports in paused_job.reports.values()
        for r in reports
        if r.groups and 2 <= r.steps < STEPS and r.forwards == r.steps
        if world_group(r).enqueued == world_group(r).completed
    ]
    assert len({rank for _, _, rank in between_steps}) > 1
    (first_step, first_seq, _), (last_step, last_seq, _) = min(between_steps), max(between_steps)
    per_step, remainder = divmod(last_seq - first_seq, last_step - first_step)
    assert per_step >= 1 and remainder == 0, "DDP's all-reduces are counted"
    for step, seq, rank in between_steps:
        assert seq == first_seq + per_step * (step - first_step), f"rank {rank} at step {step}"


def test_paused_rank_shows_where_it_waits(paused_job):
    for rank in range(RANKS):
        stack = paused_job.paused(rank)[-1].stack
        assert stack
        if rank == PAUSED_RANK:
            assert (stack[-1].func, stack[-1].file.endswith("train.py")) == ("inject", True)
        else:
            assert "backward" in {frame.func for frame in stack}
    for reports in paused_job.reports.values():
        assert reports[-1].stalled_since is None, "the stall clears when steps resume"


def test_world_group_is_described(paused_job):
    for reports in paused_job.reports.values():
        group = world_group(next(r for r in reports if r.groups))
        assert (group.backend, group.size, group.ranks) == ("gloo", RANKS, [[0, RANKS, 1]])
        assert group.timeout == 60


def test_dataloader_workers_are_found(paused_job):
    for rank, reports in paused_job.reports.items():
        (loader,) = paused_job.paused(rank)[-1].loaders
        assert loader.expected == 2
        assert {w.pid for w in loader.workers} == paused_job.children[rank]
        assert all(w.alive and w.rss and w.signal is None for w in loader.workers)
        assert any(r.data_wait and 0 < r.data_wait <= 1 for r in reports)


def test_memory_is_reported_and_gpu_absent_quietly(paused_job):
    for reports in paused_job.reports.values():
        assert all(r.memory and r.memory.rss > 0 and r.gpu is None for r in reports)


def test_killed_dataloader_worker_and_its_rank_last_words(torchrun, endpoint):
    args = ["--steps", "30", "--step-time", "0.05", "--workers", "2", "--fault", "worker-kill"]
    args += ["--fault-rank", "1", "--fault-step", "5", "--hang-seconds", "60"]
    with Listener(endpoint) as listener, torchrun(2, *args, endpoint=endpoint) as job:
        assert job.wait(timeout=90) != 0
        listener.wait_for(lambda reports: any(r.exit for r in reports if r.rank == 1), 30)
    rank1 = listener.by_rank()[1]
    dead = [w for r in rank1 for loader in r.loaders for w in loader.workers if not w.alive]
    assert dead, "the killed worker was reported"
    assert {(w.signal, w.exitcode) for w in dead} == {("SIGKILL", None)}
    (pid,) = {w.pid for w in dead}
    last = rank1[-1]
    assert last.exit is not None and last.exit.how == "exception"
    assert last.exception is not None and last.exception.type == "RuntimeError"
    assert f"pid {pid}" in last.exception.message


def test_exception_last_words_come_from_the_failing_rank(torchrun, endpoint):
    args = ["--steps", "30", "--step-time", "0.05", "--fault", "exception"]
    args += ["--fault-rank", "1", "--fault-step", "5"]
    with Listener(endpoint) as listener, torchrun(2, *args, endpoint=endpoint) as job:
        assert job.wait(timeout=90) != 0
        listener.wait_for(lambda reports: any(r.exit for r in reports if r.rank == 1), 30)
    failures = sorted((r.exception.t, r.rank, r.exception) for r in listener.snapshot() if r.exception)
    assert failures, "no last words"
    _, rank, exception = failures[0]
    assert rank == 1, "the first exception is the failing rank's"
    assert exception.type == "ValueError"
    assert exception.message.startswith("shape mismatch in batch 5")
    assert exception.where is not None
    assert (exception.where.func, exception.where.file.endswith("train.py")) == ("inject", True)
    assert all(e.type != "ValueError" for _, r, e in failures if r != 1)
    assert listener.by_rank()[1][-1].exit.how == "exception"
