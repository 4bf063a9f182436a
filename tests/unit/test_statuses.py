"""A rank's status and its words are the state's, decided once
(:mod:`distmon.monitor.state.statuses`): the table's word for a rank torn down around a failure
is the state's (stopped, not failed), and every way a rank ends is worded in one table."""

from __future__ import annotations

from dataclasses import replace

from distmon import wire
from distmon.monitor.state import JobState
from distmon.monitor.state.ending import fates, rank_ending
from distmon.monitor.state.limits import LIMITS
from distmon.monitor.state.statuses import EXITED, FAILED, HEALTHY, HUNG, STALLED, STOPPED, STOPS, ended, running_state
from distmon.wire import ExceptionInfo, ExitInfo
from tests.support.simulate import CONNECTION_CLOSED, SimJob


def test_every_way_a_rank_is_stopped_is_worded_in_one_table() -> None:
    assert set(STOPS) == wire.STOPPED_HOWS


def test_a_rank_torn_down_around_a_failure_is_stopped_not_failed() -> None:
    """Rank 0 raised on its own; rank 1 raised on losing it as the launcher tore the job down;
    rank 2 was terminated; rank 3 exited cleanly. The table says what the state defines
    (:meth:`~distmon.monitor.state.job.JobState.failed_on_their_own`), and a rank's status as a
    culprit is how it ended."""
    sim = SimJob(world=4)
    t = sim.start + 5
    raised = ExceptionInfo("ValueError", "shape mismatch", None, [], t)
    lost = ExceptionInfo("RuntimeError", CONNECTION_CLOSED, None, [], t + 0.1)
    ends = {
        0: {"exception": raised, "exit": ExitInfo("exception", t)},
        1: {"exception": lost, "exit": ExitInfo(wire.TERMINATED, t + 0.2)},
        2: {"exit": ExitInfo(wire.TERMINATED, t + 0.2)},
        3: {"exit": ExitInfo("clean", t + 0.3)},
    }
    job = JobState(LIMITS)
    for rank, how in ends.items():
        report = sim.report(rank, t)
        assert report is not None
        assert job.apply(replace(report, **how), t + 0.5)
    assert job.failed_on_their_own().tolist()[:4] == [True, False, False, False]
    assert [job.ranks[rank].status(t + 1) for rank in range(4)] == [FAILED, STOPPED, STOPPED, EXITED]
    words = [ended(job.ranks[rank].report) for rank in range(4)]
    assert words == ["raised ValueError", "raised RuntimeError", "terminated", EXITED]
    endings = [rank_ending(job.ranks[rank], t + 1, fates(job, [], t + 1)) for rank in range(4)]
    assert endings[2:] == [STOPS[wire.TERMINATED].rank, "exited cleanly"]


def test_a_running_job_is_hung_stalled_or_healthy_by_the_thresholds() -> None:
    """Hung while a stop alert stands; without one, stalled after ``stall_after`` without
    progress, and hung once its oldest collective has also waited ``hung_after``."""
    hung_after = LIMITS.hung_after
    assert running_state(True, None, 10.0, None, LIMITS) == HUNG, "an alert that stops a job stands"
    assert running_state(False, None, 10.0, None, LIMITS) == HEALTHY, "no progress measured yet"
    assert running_state(False, 9.9, 10.0, hung_after, LIMITS) == HEALTHY
    assert running_state(False, 10.0, 10.0, None, LIMITS) == STALLED, "nothing in flight"
    assert running_state(False, 10.0, 10.0, hung_after - 1, LIMITS) == STALLED
    assert running_state(False, 10.0, 10.0, hung_after, LIMITS) == HUNG
