"""Who holds up whom at the job's pace: the rank's own samples (:mod:`distmon.hooks.pace_sampler`), the
hold-ups read off them (:mod:`distmon.monitor.state.pace`) and the straggler named from them
(:mod:`distmon.monitor.rules.pace`), on simulated streams: a 10% slower rank named within 30 s,
alone, with what it costs; a healthy job never; a node as the node; a tensor-parallel
straggler's peers, who wait for it and come late to their data-parallel peers in turn, not."""

from __future__ import annotations

import itertools
import re
import time

import numpy as np
import pytest

from distmon.hooks.pace_sampler import MIN_STEPS, NAP, PaceSampler
from distmon.hooks.progress import Counters
from distmon.monitor.outside.sight import Seen
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.alerts import Alert
from distmon.node.proc import Sample
from distmon.wire import PAUSE_STEPS
from tests.support.simulate import Layout, SimJob, drive

ONSET = 30.0


def raised(sim: SimJob, until: float, monitor: Monitor | None = None) -> list[tuple[float, Alert]]:
    """Every alert raised, with when, in seconds of the simulated job."""
    monitor = monitor or Monitor(Detector(probe=sim.probe))
    return [(t - sim.start, c.alert) for t, c in drive(sim, monitor, until) if c.event == "raised"]


def said(sim: SimJob, until: float) -> tuple[float, list[Alert]]:
    """When the one straggler alert was raised (seconds of the simulated job), and each of its
    words since, as raised and updated: what it costs the job grows as the samples show it."""
    changes = drive(sim, Monitor(Detector(probe=sim.probe)), until)
    assert {(c.alert.kind, tuple(c.alert.ranks)) for _, c in changes} == {("straggler", (2,))}, changes
    events = [c.event for _, c in changes]
    assert events[0] == "raised" and "resolved" not in events, events
    return changes[0][0] - sim.start, [c.alert for _, c in changes]


class Steps:
    """A rank's step ends as its counters hold them, and whether it waits when sampled."""

    def __init__(self) -> None:
        self.counters = Counters()
        self.waits = True

    def step(self, at: float) -> float:
        self.counters.step_ends.append(at)
        return at


def test_a_rank_counts_its_samples_of_ordinary_steps_and_never_a_pauses() -> None:
    """Samples count once the step they fell in has ended, and only a step that ended within
    PAUSE_STEPS of the median: the samples of a long upload, or of the wait for another's,
    do not; nor do any before the median is known."""
    steps = Steps()
    sampler = PaceSampler(steps.counters, lambda: steps.waits)
    began = steps.step(0.0)
    assert not sampler.sample(began, 0.05), "no median yet"
    sampler.median = 0.1
    for k in range(1, 11):
        assert sampler.sample(began, began + 0.05)
        began = steps.step(k * 0.1)
    sampler.sample(began, began + 0.05)
    assert (sampler.samples, sampler.waited) == (10, 10)
    steps.waits = False
    for late in (0.05, 0.2, 0.29):
        sampler.sample(began, began + late)  # a step four times the median: a pause
    began = steps.step(began + 0.1 * (PAUSE_STEPS + 1))
    sampler.sample(began, began + 0.05)
    assert (sampler.samples, sampler.waited) == (10, 10), "the pause's samples count for nothing"
    began = steps.step(began + 0.1)
    sampler.sample(began, began + 0.05)
    assert (sampler.samples, sampler.waited) == (11, 10)


def test_no_look_is_taken_once_the_step_under_way_is_a_pause() -> None:
    """Each look takes the GIL from the training thread: none while it could not count."""
    looks = []
    steps = Steps()
    sampler = PaceSampler(steps.counters, lambda: looks.append(1) or True)
    sampler.median = 0.1
    began = steps.step(0.0)
    assert sampler.sample(began, 0.1 * PAUSE_STEPS - 0.01)
    assert not sampler.sample(began, 0.1 * PAUSE_STEPS + 0.01), "a pause already"
    assert len(looks) == 1


def test_the_step_a_nap_ends_in_counts_for_nothing() -> None:
    """Woken from a nap mid-step, the thread would see only the step's later part, where its
    collectives wait: that step's samples are dropped, the next whole step's count."""
    steps = Steps()
    sampler = PaceSampler(steps.counters, lambda: steps.waits)
    sampler.median = 0.1
    began = steps.step(0.0)
    sampler.napped(began)
    sampler.sample(began, 0.09)
    began = steps.step(0.1)
    sampler.sample(began, 0.15)
    assert (sampler.samples, sampler.waited) == (0, 0)
    began = steps.step(0.2)
    sampler.sample(began, 0.25)
    assert (sampler.samples, sampler.waited) == (1, 1)


def test_the_thread_naps_while_the_rank_has_no_group() -> None:
    """A look finding no group (training before init_process_group, or none at all) sends the
    thread to sleep for NAP, not back to its 50 looks a second."""
    steps = Steps()
    looks: list[float] = []
    sampler = PaceSampler(steps.counters, lambda: looks.append(time.monotonic()) or None)
    sampler.median = 1e6  # never a pause
    steps.step(time.monotonic())
    sampler.start()
    try:
        deadline = time.monotonic() + 60
        while len(looks) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert len(looks) >= 3, looks
    assert min(b - a for a, b in itertools.pairwise(looks)) >= NAP, looks


def test_the_median_counts_once_the_rank_has_stepped_enough() -> None:
    assert MIN_STEPS >= 5, "the first steps (compiling, warming up) are no measure"


@pytest.mark.parametrize(("factor", "within"), [(1.1, 30.0), (1.2, 20.0), (1.5, 15.0)])
def test_a_slower_rank_is_named_alone_with_what_it_costs(factor: float, within: float) -> None:
    """Rank 2 of 8 takes ``factor`` times as long for its work from 30 s on: named within
    ``within`` seconds, alone, once, saying how much slower the job steps because of it (as
    the samples of its slow steps come to outweigh those before)."""
    sim = SimJob(world=8, step_time=0.05).straggler(2, factor, data_wait=0.02, at=ONSET)
    t, words = said(sim, ONSET + 120)
    assert ONSET < t <= ONSET + within, t - ONSET
    cost = re.search(r"the job steps (\d+)% slower because of rank 2$", words[-1].summary)
    assert cost is not None, words[-1].summary
    slower = 100 * 0.9 * (factor - 1)  # its work is 90% of a step: moving the data is not slower
    assert abs(int(cost.group(1)) - slower) <= 2, words[-1].summary
    assert "What to do: look at node000: GPU 2's clocks and throttling" in words[-1].detail, words[-1].detail


def test_a_rank_5_percent_slower_is_named_later_over_the_longer_window() -> None:
    sim = SimJob(world=8, step_time=0.05).straggler(2, 1.05, data_wait=0.02, at=ONSET)
    t, _ = said(sim, ONSET + 300)
    assert 30 < t - ONSET <= 240, t - ONSET


def test_a_healthy_job_never_has_a_straggler() -> None:
    """Ten minutes of a healthy job's samples: nobody holds anybody up beyond chance."""
    sim = SimJob(world=16, step_time=0.05)
    monitor = Monitor(Detector(probe=sim.probe))
    assert raised(sim, 600, monitor) == []
    held = monitor.state.holdups()
    assert np.nanmax(np.abs(held.sure[:16])) < 3, held.sure[:16]


def test_among_many_ranks_the_one_slower_is_named_and_no_other_by_chance() -> None:
    """256 ranks, each hold-up read against chance among as many: rank 100 20% slower is
    named alone, and the largest of 255 healthy ranks' chance deviations names none."""
    sim = SimJob(world=256, step_time=0.05).straggler(100, 1.2, data_wait=0.02, at=ONSET)
    alerts = raised(sim, ONSET + 90)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [100])], [a.summary for _, a in alerts]


def test_a_slow_tensor_parallel_rank_is_named_not_the_peers_that_wait_for_it() -> None:
    """TP 2 x DP 4: rank 5 slow; rank 4 waits for it in their tensor-parallel group and comes
    late to its data-parallel peers for its sake. Only rank 5 is named."""
    sim = SimJob(world=8, step_time=0.05, layout=Layout(tp=2)).straggler(5, 1.2, data_wait=0.02, at=ONSET)
    alerts = raised(sim, ONSET + 40)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [5])], [a.summary for _, a in alerts]


def test_a_node_whose_ranks_are_all_slower_is_named_as_the_node() -> None:
    sim = SimJob(world=16, ranks_per_host=4, step_time=0.05)
    for rank in range(4, 8):
        sim.straggler(rank, 1.2, data_wait=0.02, at=ONSET)
    alerts = raised(sim, ONSET + 40)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [4, 5, 6, 7])], [a.summary for _, a in alerts]
    summary = alerts[0][1].summary
    assert summary.startswith("node node001 is slow: its ranks 4-7 hold up their peers "), summary
    assert summary.endswith("slower because of node node001"), summary


def test_a_straggler_near_the_line_is_one_alert_resolved_once_it_steps_as_the_others() -> None:
    """Rank 2 8% slower for four minutes, then as fast as its peers: one alert, resolved within
    two minutes of its recovery."""
    sim = SimJob(world=8, step_time=0.05).straggler(2, 1.08, data_wait=0.02, at=ONSET, lasts=240)
    changes = drive(sim, Monitor(Detector(probe=sim.probe)), ONSET + 420)
    events = [(c.event, c.alert.ranks) for _, c in changes if c.event != "updated"]
    assert events == [("raised", [2]), ("resolved", [2])], events
    resolved = next(t for t, c in changes if c.event == "resolved") - sim.start
    assert ONSET + 240 < resolved <= ONSET + 360, resolved - ONSET - 240


def seen_waiting_for_cpu(share: float, peers: float) -> object:
    """What an eye on the ranks' host sees: rank 2's training thread waits for a CPU
    ``share`` of the time, the others ``peers``."""

    def outside(host: str, pid: int) -> Seen:
        waited = share if pid == 10_002 else peers
        first, last = (Sample(pid, t, "R", syscall="running", cpu=0.1 * t, queued=waited * t, load=6.0) for t in (0, 2))
        return Seen(first, last, first)

    return outside


def test_ranks_sharing_a_hosts_cpus_are_late_for_the_schedulers_sake_and_not_named() -> None:
    """On a host with more work than CPUs every rank waits for one, and comes late as the
    scheduler has it: rank 2 holding its peers on that host up by less than twice what it
    and they waited for a CPU is not named."""
    sim = SimJob(world=4, step_time=0.05).straggler(2, 1.1, data_wait=0.02, at=ONSET)
    monitor = Monitor(Detector(probe=sim.probe, outside=seen_waiting_for_cpu(0.1, 0.1)))
    assert raised(sim, ONSET + 60, monitor) == []


def test_a_rank_short_of_cpu_while_its_peers_are_not_is_named_so() -> None:
    sim = SimJob(world=4, step_time=0.05).straggler(2, 1.3, data_wait=0.02, at=ONSET)
    monitor = Monitor(Detector(probe=sim.probe, outside=seen_waiting_for_cpu(0.3, 0.0)))
    alerts = raised(sim, ONSET + 60, monitor)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [2])], [a.summary for _, a in alerts]
    assert alerts[0][1].summary.startswith("rank 2 is short of CPU: its training thread waited for a CPU 30%")


def test_a_rank_waiting_for_a_cpu_as_its_peers_do_is_named_as_holding_them_up() -> None:
    """A loaded host where every rank waits for a CPU a fifth of the time or more: rank 2, twice as
    slow, holds its peers up by more than twice that, and is named for it, not as short of CPU
    (its peers are as short)."""
    sim = SimJob(world=4, step_time=0.05).straggler(2, 2.0, data_wait=0.02, at=ONSET)
    monitor = Monitor(Detector(probe=sim.probe, outside=seen_waiting_for_cpu(0.22, 0.2)))
    alerts = raised(sim, ONSET + 60, monitor)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [2])], [a.summary for _, a in alerts]
    assert alerts[0][1].summary.startswith("rank 2 holds up its peers "), alerts[0][1].summary


def test_a_rank_slow_of_its_own_and_waiting_for_a_cpu_a_little_longer_holds_its_peers_up() -> None:
    """Rank 2, twice as slow, waits for a CPU 22% of the time, its peers 10%: the 12% beyond
    theirs makes up little of what it holds them up by, and it is not named as short of CPU."""
    sim = SimJob(world=4, step_time=0.05).straggler(2, 2.0, data_wait=0.02, at=ONSET)
    monitor = Monitor(Detector(probe=sim.probe, outside=seen_waiting_for_cpu(0.22, 0.1)))
    alerts = raised(sim, ONSET + 60, monitor)
    assert [(a.kind, a.ranks) for _, a in alerts] == [("straggler", [2])], [a.summary for _, a in alerts]
    assert alerts[0][1].summary.startswith("rank 2 holds up its peers "), alerts[0][1].summary
