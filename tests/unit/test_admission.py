"""Admission: only reports that fit the job enter the monitor's state, each refusal counted
by reason, and memory bounded by the job's own world size whatever the senders claim."""

from __future__ import annotations

import dataclasses

from distmon.monitor.state import JobState, admission
from distmon.monitor.state.limits import LIMITS
from distmon.wire import ExitInfo, report_bytes
from distmon.wire.sockets import Batch
from tests.support.messages import T0, message, report


def job_of_four() -> JobState:
    state = JobState(LIMITS)
    for rank in range(4):
        assert state.ingest(message(report(rank)), T0)
    return state


def test_ranks_outside_the_world_are_refused_and_counted() -> None:
    state = job_of_four()
    for rank in (-1, 4, 99_999, 10**18):
        assert state.ingest(message(report(rank)), T0 + 1) is None
    assert sorted(state.ranks) == [0, 1, 2, 3]
    assert state.dropped == {admission.RANK_OUT_OF_RANGE: 4}


def test_the_world_size_is_the_one_the_job_started_with() -> None:
    state = job_of_four()
    assert state.ingest(message(report(5, world=8)), T0 + 1) is None
    assert state.ingest(message(report(1, world=2)), T0 + 1) is None
    assert state.world == 4 and state.dropped == {admission.WORLD_CHANGED: 2}


def test_a_world_beyond_the_cap_is_refused_even_first() -> None:
    state = JobState(LIMITS)
    for world in (0, -4, admission.MAX_WORLD + 1, 10**18):
        assert state.ingest(message(report(0, world=world)), T0) is None
    assert not state.ranks and state.job is None
    assert state.dropped == {admission.WORLD_TOO_LARGE: 4}


def test_a_hundred_thousand_fake_ranks_cost_nothing() -> None:
    """As a flood arrives through the live feed: batches of what came in each cycle."""
    state = job_of_four()
    fakes = [message(report(rank, pid=7)) for rank in range(100_000)]
    for start in range(0, len(fakes), 10_000):
        state.ingest_batch(Batch.of(fakes[start : start + 10_000]), T0 + 1)
    assert len(state.ranks) == 4
    assert state.dropped[admission.RANK_OUT_OF_RANGE] == 100_000 - 4
    assert state.dropped[admission.PROCESS_CHURN] == 4, "the fakes that hit real ranks are churn"


def test_pid_and_host_churn_is_refused_while_the_rank_reports() -> None:
    state = job_of_four()
    churn = [report(2, pid=5000 + i) for i in range(50)] + [report(2, host=f"other-{i}") for i in range(50)]
    for i, fake in enumerate(churn):
        assert state.ingest(message(fake), T0 + 0.01 * i) is None
        state.ingest(message(report(2)), T0 + 0.01 * i)  # the real rank goes on reporting
    assert state.ranks[2].report.pid == 1002 and state.ranks[2].report.host == "node-a"
    assert state.dropped == {admission.PROCESS_CHURN: 100}


def test_a_restart_replaces_the_process_after_its_exit_or_its_silence() -> None:
    state = job_of_four()
    state.ingest(message(report(1, exit=ExitInfo(how="terminated", t=T0 + 1))), T0 + 1)
    assert state.ingest(message(report(1, pid=2001)), T0 + 1.1), "an exited process is replaced at once"
    assert state.ingest(message(report(3, pid=2003, host="node-b")), T0 + 2.5), "silent for two intervals"
    assert state.ranks[1].report.pid == 2001 and state.ranks[3].report.host == "node-b"
    assert state.ranks[3].first_seen == T0 + 2.5, "a new process starts a new history"
    assert not state.dropped


def test_an_absurd_interval_does_not_stretch_the_restart_wait_beyond_a_minute() -> None:
    state = JobState(LIMITS)
    state.ingest(message(report(0, interval=1e300)), T0)
    assert state.ingest(message(report(0, pid=9)), T0 + 30) is None
    assert state.ingest(message(report(0, pid=9)), T0 + admission.RESTART_QUIET_MAX)


def test_the_bytes_kept_are_capped(monkeypatch) -> None:
    monkeypatch.setattr("distmon.monitor.state.ingest.MAX_RETAINED_BYTES", 1000)
    state = JobState(LIMITS)
    big = report_bytes(message(report(0, world=64, host="h" * 300)))
    for rank in range(64):
        state.ingest(message(report(rank, world=64, host="h" * 300)), T0)
    kept = len(state.ranks)
    assert kept == 1000 // len(big)
    assert state.retained <= 1000
    assert state.dropped == {admission.OVER_BUDGET: 64 - kept}
    assert state.ingest(message(report(0, world=64, host="h" * 300, steps=1)), T0 + 1), "a rank's update fits"


def test_a_new_job_after_the_last_one_ended_starts_afresh() -> None:
    state = job_of_four()
    for rank in range(4):
        state.ingest(message(report(rank, exit=ExitInfo(how="clean", t=T0 + 1))), T0 + 1)
    assert state.ingest(message(dataclasses.replace(report(7, world=8), job="next")), T0 + 2)
    assert state.job == "next" and state.world == 8 and list(state.ranks) == [7]


def test_the_same_job_id_relaunched_at_another_size_after_it_ended_starts_afresh() -> None:
    state = job_of_four()
    assert state.ingest(message(report(0, world=2, pid=1)), T0 + 1) is None, "while it runs: refused"
    for rank in range(4):
        state.ingest(message(report(rank, exit=ExitInfo(how="clean", t=T0 + 1))), T0 + 1)
    assert state.ingest(message(report(0, world=2, pid=1)), T0 + 2)
    assert state.world == 2 and list(state.ranks) == [0]


def test_a_first_frame_whose_report_does_not_decode_is_dropped_not_raised() -> None:
    """Its header fits the job, its report is garbage: counted as malformed, and the next
    frame is the one the monitor follows (it raised out of the monitor's loop before)."""
    state = JobState(LIMITS)
    good = message(report(0))
    broken = good[: len(good) - 8] + b"\xc1" * 8  # 0xc1: never used by msgpack
    assert state.ingest(broken, T0) is None
    assert state.dropped == {"malformed": 1} and state.job is None
    assert state.ingest(good, T0)
    assert state.job == "job" and sorted(state.ranks) == [0]
