"""The job's routine pauses (:mod:`distmon.monitor.rules.routine`) on simulated streams: a
pause the job takes again and again is learned and raises nothing; one that outlasts itself
is a hang, named as one; what is new is named as fast as before."""

from __future__ import annotations

from collections.abc import Callable

from distmon.monitor.outside.sight import Seen
from distmon.monitor.overview import Story
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.detector import Detector
from distmon.monitor.rules.process import look_at
from distmon.monitor.rules.routine import MARGIN, Habit, Mark, Routine
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.limits import Thresholds
from distmon.node.prober import CLOSE_PERIOD
from distmon.node.proc import GIL_WAKES, Sample
from tests.support.simulate import SimJob, drive

EVERY, LASTS, FIRST = 8.0, 3.0, 20.0
"""Rank 0 uploads its metrics every 8 s, for 3 s, from 20 s on."""


Look = tuple[str, str, float]
"""What one look sees: the process state, the call its main thread is in, cores of CPU used."""
WORKING: Look = ("R", "running", 1.0)


class Prober:
    """What a prober on the ranks' host sees at the monitor's time, four looks a second:
    every rank at work, and the rank the others wait for as ``held`` says (a look, or a
    function of the time giving one); ``after``, what that rank does once it goes on; with
    ``wakes``, how often that rank's reporting thread wakes a second meanwhile (once a second
    otherwise)."""

    def __init__(
        self,
        sim: SimJob,
        held: Look | Callable[[float], Look],
        after: Callable[[float], Look] | None = None,
        wakes: float | None = None,
    ) -> None:
        self.sim, self.held, self.after, self.wakes, self.now = sim, held, after, wakes, sim.start
        self.culprit: int | None = None

    def __call__(self, host: str, pid: int) -> Seen:
        rank, looks, cpu, woke = pid - 10_000, [], 0.0, 0.0
        for i in range(9):
            t = self.now - 2.0 + i * CLOSE_PERIOD
            held = self.sim.holding_up(t) == rank
            if held:
                self.culprit = rank
            if held:
                state, call, cores = self.held(t) if callable(self.held) else self.held
            elif rank == self.culprit and self.after is not None:
                state, call, cores = self.after(t)
            else:
                state, call, cores = WORKING
            cpu += cores * CLOSE_PERIOD
            woke += (self.wakes if held and self.wakes is not None else 1.0) * CLOSE_PERIOD
            wakes = int(woke) if self.wakes is not None else None
            looks.append(Sample(pid, t, state, syscall=call, cpu=cpu, reporter_wakes=wakes))
        return Seen(looks[0], looks[-1], looks[-5], tuple(looks))


def run(sim: SimJob, prober: Prober, until: float) -> tuple[list[tuple[float, Alert]], dict[float, str]]:
    """Each alert raised (with the time, from the start), copied as it stood when first
    critical if it became so; and rank 0's status at each tick."""
    monitor = Monitor(Detector(probe=sim.probe, outside=prober))
    raised: list[tuple[float, Alert]] = []
    status: dict[float, str] = {}
    tick = monitor.tick

    def tick_and_keep(now: float) -> list:
        prober.now = now
        changes = tick(now)
        for c in changes:
            if c.event == "raised" or c.escalated:
                raised.append((now - sim.start, Alert(**{**c.alert.to_json()})))
        said = Story.of(monitor, now).status(monitor.state.ranks[0]) if 0 in monitor.state.ranks else None
        if said:
            status[now - sim.start] = said
        return changes

    monitor.tick = tick_and_keep  # type: ignore[method-assign]
    drive(sim, monitor, until)
    return raised, status


def test_a_pause_the_job_takes_again_and_again_is_learned_and_raises_nothing() -> None:
    """The first upload warns, as before; after that the job is quiet, and rank 0's status
    says it pauses as usual, where and how long."""
    sim = SimJob(world=8).pause(0, at=FIRST, every=EVERY, seconds=LASTS)
    raised, status = run(sim, Prober(sim, ("S", "poll", 0.0)), until=FIRST + 12 * EVERY)
    assert all(a.ranks == [0] and a.severity == "warning" for _, a in raised), raised
    assert all(t < FIRST + EVERY for t, _ in raised), [(t, a.summary) for t, a in raised]
    assert raised and raised[0][1].summary.startswith("rank 0 is asleep in poll")
    usual = [words for t, words in status.items() if t > FIRST + 3 * EVERY and "as usual" in words]
    assert usual and usual[0].startswith("pausing as usual: upload_metrics, about 3s"), status


def test_a_routine_pause_that_outlasts_itself_is_a_hang_named_as_one() -> None:
    """The sixth upload never returns: rank 0 alone is named, critical, once the pause has
    lasted twice its longest, saying how long it usually takes."""
    sim = SimJob(world=8).pause(0, at=FIRST, every=EVERY, seconds=LASTS, stuck=5)
    stuck_at = FIRST + 5 * EVERY
    raised, _ = run(sim, Prober(sim, ("S", "poll", 0.0)), until=stuck_at + 30)
    late = [(t, a) for t, a in raised if t >= stuck_at]
    assert [a.ranks for _, a in late] == [[0]], late
    t, alert = late[0]
    assert alert.severity == "critical" and "this pause usually ends within" in alert.summary, alert.summary
    assert MARGIN * LASTS <= t - stuck_at < 20, t - stuck_at
    assert "The job pauses so as a habit (upload_metrics" in alert.detail


def test_a_rank_stopped_in_its_usual_pause_is_named_as_fast_as_before() -> None:
    """Once the uploads are learned, rank 0 is SIGSTOPped in its sixth: nothing about the
    upload fits a stopped process, so it is named early, a warning at once."""
    stuck_at = FIRST + 5 * EVERY
    sim = SimJob(world=8).pause(0, at=FIRST, every=EVERY, seconds=LASTS, stuck=5)
    raised, _ = run(
        sim, Prober(sim, lambda t: ("T", "", 0.0) if t >= stuck_at else ("S", "poll", 0.0)), until=stuck_at + 15
    )
    late = [(t, a) for t, a in raised if t >= stuck_at]
    assert late and late[0][1].ranks == [0] and late[0][1].summary.startswith("rank 0 is stopped (SIGSTOP)"), late
    assert late[0][0] - stuck_at < Thresholds().hang_after(0.2)


def test_a_rank_asleep_where_it_never_slept_is_named_as_fast_as_before() -> None:
    """Rank 0 asleep again, but in clock_nanosleep, not in the upload's poll: a new pause."""
    stuck_at = FIRST + 5 * EVERY
    sim = SimJob(world=8).pause(0, at=FIRST, every=EVERY, seconds=LASTS)
    sim.pause(0, at=stuck_at + 1, every=1000, seconds=1000, stack="sleep_elsewhere")
    doing = Prober(sim, lambda t: ("S", "clock_nanosleep", 0.0) if t >= stuck_at + 1 else ("S", "poll", 0.0))
    raised, _ = run(sim, doing, until=stuck_at + 15)
    late = [(t, a) for t, a in raised if t >= stuck_at]
    assert late and late[0][1].summary.startswith("rank 0 is asleep in clock_nanosleep"), late
    assert late[0][0] - (stuck_at + 1) < Thresholds().hang_after(0.2)


def test_without_a_prober_a_long_routine_pause_is_learned_from_the_ranks_stacks() -> None:
    """A replay has no prober: pauses past the hang threshold are named (by the rank's own
    stack, in upload_metrics) the first time, then learned."""
    sim = SimJob(world=8).pause(0, at=FIRST, every=15.0, seconds=7.0)
    monitor = Monitor(Detector(probe=sim.probe))
    raised = [(t - sim.start, c.alert) for t, c in drive(sim, monitor, FIRST + 10 * 15) if c.event == "raised"]
    assert [a.ranks for _, a in raised] == [[0]], [(t, a.summary) for t, a in raised]
    assert all(t < FIRST + 15 for t, _ in raised)


def test_a_rank_busy_for_the_wait_then_back_at_its_steps_is_not_named_for_the_sleep_a_look_caught() -> None:
    """Rank 0 is busy for 1.1 s (a garbage-collection pass) while the others wait, then steps
    again, a short sleep in each step; the others' reports (every 2 s) show the wait for a
    second more. What the monitor says holds for the time it looked: no warning that rank 0
    is asleep (the last look caught it between two steps)."""
    sim = SimJob(world=8, interval=2.0).pause(0, at=FIRST, every=1000.0, seconds=1.1)

    def stepping(t: float) -> Look:
        return ("R", "running", 0.1) if round(t / CLOSE_PERIOD) % 2 else ("S", "clock_nanosleep", 0.1)

    raised, _ = run(sim, Prober(sim, WORKING, after=stepping), until=FIRST + 10)
    assert raised == []


def test_a_rank_that_burns_cpu_while_its_reports_stop_is_named_early_for_holding_the_gil() -> None:
    """One long C call on the training thread (a regular expression that backtracks): the
    process works, but its own reporting thread cannot run. Named a warning well before the
    hang threshold, saying it holds the GIL."""
    sim = SimJob(world=8).gil(3, at=FIRST)
    raised, _ = run(sim, Prober(sim, WORKING), until=FIRST + 10)
    (t, alert), *_ = raised
    assert alert.ranks == [3] and alert.severity == "warning", alert
    assert alert.summary.startswith("rank 3 holds the GIL, burning CPU"), alert.summary
    assert t - FIRST < Thresholds().hang_after(0.2)


def test_a_reporting_thread_seen_waking_for_the_gil_names_the_rank_once_its_report_is_late() -> None:
    """Its reporting thread wakes 200 times a second to ask for the GIL: once its report is
    half a second late, that is the proof. Where the eye cannot count its wakes, a second more of silence
    is (a garbage-collection pass delays a report; it does not silence it that long)."""

    def first_alert(wakes: float | None) -> float:
        sim = SimJob(world=8).gil(3, at=FIRST)
        raised, _ = run(sim, Prober(sim, WORKING, wakes=wakes), until=FIRST + 10)
        (t, alert), *_ = raised
        assert alert.ranks == [3] and alert.summary.startswith("rank 3 holds the GIL"), alert.summary
        return t

    assert first_alert(None) - first_alert(GIL_WAKES) >= 1.0
    assert first_alert(1.0) == first_alert(None), "waking once a second, it waits for its next report"


def test_the_ranks_waits_for_a_routine_pause_make_no_straggler() -> None:
    """Rank 0 uploads for 2 s every 3 s: its peers wait for it most of the time, which is the
    job's rhythm, not a slow rank."""
    sim = SimJob(world=8).pause(0, at=FIRST, every=3.0, seconds=2.0)
    raised, _ = run(sim, Prober(sim, ("S", "poll", 0.0)), until=FIRST + 60)
    assert [a.kind for _, a in raised] == ["hang"], [(t, a.summary) for t, a in raised]


def test_a_main_thread_seen_in_one_call_after_another_over_the_wait_moves() -> None:
    """The last look caught a sleep, the others running: over the wait, the rank steps. It
    is not "asleep", whatever its last look."""
    sim = SimJob(world=8).hang(3, at=FIRST)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, FIRST + 8)
    looks = [
        Sample(
            10_003, t, "S" if i % 2 == 0 else "R", syscall="clock_nanosleep" if i % 2 == 0 else "running", cpu=0.05 * t
        )
        for i, t in enumerate(x * CLOSE_PERIOD for x in range(9))
    ]
    seen = Seen(looks[0], looks[-1], looks[-5], tuple(looks))
    ctx = Context(now=sim.start + FIRST + 8, pace=0.2, probe=None, limits=Thresholds(), outside=lambda h, p: seen)
    assert look_at(monitor.state.ranks[3], ctx, silent=False).verdict.kind == "sleeping", "one look: asleep"
    assert look_at(monitor.state.ranks[3], ctx, silent=False, waited=2.0).verdict.kind == "working"


def test_a_rank_slower_in_every_step_is_a_straggler_not_a_habit() -> None:
    """Rank 3 sleeps 50 ms in every step: the job's 10 ms steps take 60 ms. Its peers wait for
    it in every step, a fraction of a step each time; read once a second, their waits age
    between two reports as if the job stood still for it. That is the job's pace, not a
    routine pause: rank 3 is named a straggler, and nothing is learned as a habit."""
    sim = SimJob(world=8, step_time=0.01).straggler(3, 6.0, data_wait=0.02)
    monitor = Monitor(Detector(probe=sim.probe))
    raised = [c.alert for _, c in drive(sim, monitor, 60) if c.event == "raised"]
    assert [(a.kind, a.ranks) for a in raised] == [("straggler", [3])], [a.summary for a in raised]
    assert monitor.detector.routine.habits == []


def _tick(routine: Routine, waited: float, mark: Mark, step: int) -> Habit | None:
    """One tick in which rank 1 holds the others up, ``mark`` where the monitor sees it."""
    habit = routine.observe([1], waited, {1: mark}, {1: step}, paused=waited > 1)
    routine.settle(lambda rank: True, learning=True)
    return habit


ASLEEP = Mark("train.py:inject", "sleeping:sleep", "asleep in clock_nanosleep")


def test_a_pause_first_seen_from_a_report_sent_before_it_is_learned_where_it_was() -> None:
    """Rank 1 sleeps 6 s at step 60, first seen from its report of step 57 (sent before it got
    there: nothing known yet of where it is), then asleep in inject at step 60. The habit is
    learned where it was, and a stop of rank 1 later fits it not: a fresh-clone run of
    tests/jobs/test_nodes.py learned it with no place at all (rank 1 past step 57 was taken to
    have come out of it), a habit that fit anything, and the stop went unnamed for 12 s."""
    routine = Routine()
    _tick(routine, 0.6, Mark(), 57)
    for waited in (2.1, 3.1, 6.1):
        _tick(routine, waited, ASLEEP, 60)
    routine.settle(lambda rank: True, learning=True)  # the others' collective completed: it ended
    [habit] = routine.habits
    assert (habit.places.frames, habit.places.doings) == ({1: {"train.py:inject"}}, {1: {"sleeping:sleep"}})
    assert _tick(routine, 0.6, Mark(), 266) is habit, "nothing known yet: it may be the habit"
    assert _tick(routine, 2.3, Mark(None, "sigstopped", "stopped (SIGSTOP)"), 266) is None


def test_a_pause_never_seen_where_it_was_is_not_learned() -> None:
    """A pause whose rank was never placed (no stack, no look) would fit any later pause."""
    routine = Routine()
    for waited in (0.6, 2.1, 6.1):
        _tick(routine, waited, Mark(), 60)
    routine.settle(lambda rank: True, learning=True)
    assert routine.habits == []


def test_a_rank_that_worked_then_blocked_holding_the_gil_is_named_for_the_block_not_for_burning_cpu() -> None:
    """Rank 3 computed, then blocked opening a FIFO in C++ (``torch.save`` to a named pipe
    nobody reads: the open holds the GIL), its reporting thread silent. Over the wait its CPU
    moved, but not over its last second: it is blocked in the kernel on that file, not
    "burning CPU" (a fresh-clone run of tests/jobs/test_stopped_and_working_ranks_jobs.py said
    that under load)."""
    sim = SimJob(world=8).gil(3, at=FIRST)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, FIRST + 8)
    looks = [
        Sample(10_003, t, "R", syscall="running", cpu=t)
        if i < 3
        else Sample(10_003, t, "S", syscall="openat", target="/ckpt/step_45.pt", fifo=True, cpu=2 * CLOSE_PERIOD)
        for i, t in enumerate(x * CLOSE_PERIOD for x in range(9))
    ]
    seen = Seen(looks[0], looks[-1], looks[-5], tuple(looks))
    ctx = Context(now=sim.start + FIRST + 8, pace=0.2, probe=None, limits=Thresholds(), outside=lambda h, p: seen)
    verdict = look_at(monitor.state.ranks[3], ctx, silent=True, waited=2.0).verdict
    assert verdict is not None and verdict.summary.startswith("is blocked in the kernel opening /ckpt/step_45.pt")
