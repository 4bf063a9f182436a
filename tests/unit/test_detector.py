"""The detector's rules on simulated streams: each fault is named, with its culprit, in time;
a healthy job raises nothing."""

from __future__ import annotations

import math
import re
from copy import copy
from dataclasses import replace

import numpy as np
import pytest

from distmon.monitor.outside.sight import SPAN, Seen
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.base import Outside
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import Change
from distmon.monitor.state.limits import LIMITS, Thresholds
from distmon.node.proc import Sample
from distmon.wire import P2P, GpuStatus, GroupStatus, Report, StepStats, decode, encode, rank_runs
from tests.support.messages import report
from tests.support.simulate import Layout, SimJob, drive


def raised(sim: SimJob, until: float, probe: bool = True) -> list[tuple[float, Change]]:
    monitor = Monitor(Detector(probe=sim.probe if probe else None))
    return [(t - sim.start, c) for t, c in drive(sim, monitor, until) if c.event == "raised"]


def first(changes: list[tuple[float, Change]], kind: str) -> tuple[float, Change]:
    matching = [(t, c) for t, c in changes if c.alert.kind == kind]
    assert matching, f"no {kind} alert among {[c.alert.kind for _, c in changes]}"
    return matching[0]


@pytest.mark.parametrize("world", [2, 8, 64])
def test_healthy_job_raises_nothing(world: int) -> None:
    assert raised(SimJob(world=world), until=90) == []


def test_a_slow_job_is_judged_by_its_own_pace() -> None:
    """Four-second steps: collectives legitimately take seconds; still nothing to report."""
    assert raised(SimJob(world=8, step_time=4.0), until=120) == []


FAULTS = [
    # (name, fault, kind, culprits, seconds after the fault by which the alert must be up)
    ("stuck rank", lambda s: s.hang(3, at=20), "hang", [3], 8),
    ("rank-conditional barrier", lambda s: s.extra_collective(0, at=20), "divergence", [0], 5),
    ("uneven batches", lambda s: s.uneven(5, at=20), "divergence", [5], 5),
    ("exception", lambda s: s.exception(2, at=20), "rank_exception", [2], 2),
    ("SIGKILL", lambda s: s.kill(6, at=20), "rank_lost", [6], 4),
    ("worker killed", lambda s: s.worker_kill(1, at=20), "worker_crash", [1], 2),
    ("GIL held", lambda s: s.gil(4, at=20), "hang", [4], 8),
    ("straggler", lambda s: s.straggler(4, 3.0), "straggler", [4], 30),
    ("leak", lambda s: s.leak(7, 50e6, at=20), "memory_pressure", [7], 30),
]


@pytest.mark.parametrize(("name", "inject", "kind", "culprits", "within"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_is_named_with_its_culprit(name, inject, kind, culprits, within) -> None:
    sim = SimJob(world=8)
    inject(sim)
    changes = raised(sim, until=60)
    t, change = first(changes, kind)
    assert change.alert.ranks == culprits
    at = 0 if kind == "straggler" else 20
    assert t - at <= within
    for other in changes:
        assert set(other[1].alert.ranks) <= set(culprits) or other[1].alert.kind != kind


def test_a_timeout_raised_in_python_is_a_consequence_as_in_analyze() -> None:
    """torch 1.12-2.0's blocking wait raises the peer's timeout in the rank that waited: live as
    in ``distmon analyze`` (one rule, ``wire.PEER_LOST``), that rank is no first cause."""
    timed_out = (
        "[Rank 5] Caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, TensorShape=[1], "
        "Timeout(ms)=1000) ran for 1003 milliseconds before timing out."
    )
    changes = raised(SimJob(world=8).exception(5, at=20, type="RuntimeError", message=timed_out), until=40)
    named = [c.alert for _, c in changes if c.alert.kind == "rank_exception"]
    assert named and all("rank 5 raised" not in a.summary for a in named)


def test_victims_of_an_exception_are_not_culprits() -> None:
    changes = raised(SimJob(world=8).exception(2, at=20), until=40)
    kinds = {c.alert.kind: c.alert for _, c in changes}
    assert kinds["rank_exception"].ranks == [2]
    assert "ranks 0-1, 3-7 failed because of it" in kinds["rank_exception"].detail
    assert "rank_lost" not in kinds, "ranks torn down after the failure are not lost"


def test_killed_rank_is_named_not_the_ranks_that_lost_it() -> None:
    changes = raised(SimJob(world=8).kill(6, at=20), until=40)
    assert [c.alert.ranks for _, c in changes] == [[6]]
    assert "process gone" in changes[0][1].alert.summary


def test_a_silent_rank_whose_process_lives_is_one_hang_not_a_lost_rank() -> None:
    """One incident, one alert: the rank the others wait for, silent, its process alive."""
    changes = raised(SimJob(world=8).gil(4, at=20), until=40)
    assert [(c.alert.kind, c.alert.ranks) for _, c in changes] == [("hang", [4])]
    assert "silent for" in changes[0][1].alert.detail


def test_without_a_probe_lost_rank_says_it_cannot_tell() -> None:
    changes = raised(SimJob(world=8).kill(6, at=20), until=40, probe=False)
    assert "no last words" in first(changes, "rank_lost")[1].alert.summary


def test_hang_evidence_shows_the_culprits_stack_and_the_timeout() -> None:
    changes = raised(SimJob(world=8, timeout=600).hang(3, at=20), until=40)
    alert = first(changes, "hang")[1].alert
    assert "collective #" in alert.summary and "all_reduce" in alert.summary
    assert "save_checkpoint" in alert.detail and "time.sleep(600)" in alert.detail
    assert "collective timeout fires in" in alert.detail
    assert "What to do" in alert.detail


def test_divergence_names_the_op_and_the_step_gap() -> None:
    changes = raised(SimJob(world=8).uneven(5, at=20), until=40)
    alert = first(changes, "divergence")[1].alert
    assert "barrier" in alert.summary and "all_reduce" in alert.summary
    assert "uneven batch counts" in alert.detail


def test_worker_crash_gives_pid_signal_and_likely_cause() -> None:
    alert = first(raised(SimJob(world=4).worker_kill(1, at=10), until=20), "worker_crash")[1].alert
    assert "20010" in alert.summary and "SIGKILL" in alert.summary
    assert "OOM killer" in alert.detail


def test_hang_resolves_when_the_rank_comes_back() -> None:
    sim = SimJob(world=4).hang(1, at=10)
    monitor = Monitor(Detector())
    drive(sim, monitor, until=30)
    assert [a.kind for a in monitor.alerts.active.values()] == ["hang"]
    healthy = SimJob(world=4)
    for t, raw in healthy.stream(until=35, since=31):
        monitor.ingest(raw, t)
    changes = monitor.tick(healthy.start + 35)
    assert [(c.event, c.alert.kind) for c in changes] == [("resolved", "hang")]


def test_gpu_near_its_limit_and_gpu_faults() -> None:
    sim = SimJob(world=2)
    monitor = Monitor(Detector())
    drive(sim, monitor, until=5)
    report = sim.report(1, sim.start + 5.5)
    assert report is not None
    report.gpu = GpuStatus(index=1, used=79 * 1024**3, total=80 * 1024**3, xid=79, throttle=["hw_slowdown"])
    monitor.ingest(encode(report), sim.start + 5.5)
    kinds = {c.alert.kind: c.alert for c in monitor.tick(sim.start + 6)}
    assert kinds["memory_pressure"].ranks == [1]
    assert kinds["gpu_fault"].severity == "critical" and "Xid 79" in kinds["gpu_fault"].summary


def test_at_scale_the_culprit_is_still_named() -> None:
    changes = raised(SimJob(world=1024, ranks_per_host=8).hang(777, at=10), until=25)
    assert first(changes, "hang")[1].alert.ranks == [777]


def test_an_nccl_stream_that_runs_ahead_is_healthy_and_its_hang_is_named() -> None:
    """NCCL enqueues ahead: a healthy rank always has collectives in flight."""
    assert raised(SimJob(world=16, ahead=3), until=60) == []
    changes = raised(SimJob(world=16, ahead=3).hang(7, at=20), until=40)
    t, change = first(changes, "hang")
    assert change.alert.ranks == [7] and t - 20 <= 8


@pytest.mark.parametrize(
    ("world", "layout", "culprit"),
    [(8, Layout(tp=2), 5), (64, Layout(tp=4, pp=2), 13), (1024, Layout(tp=8, pp=4), 333)],
    ids=["tp2xdp4", "tp4xpp2xdp8", "tp8xpp4xdp32"],
)
def test_a_stall_across_groups_names_the_one_root(world: int, layout: Layout, culprit: int) -> None:
    """Its TP peers wait for it, every other group waits for one of those: one alert, one rank."""
    sim = SimJob(world=world, layout=layout).hang(culprit, at=20)
    changes = raised(sim, until=32)
    assert [(c.alert.kind, c.alert.ranks) for _, c in changes] == [("hang", [culprit])]
    t, change = changes[0]
    assert t - 20 <= 10
    detail = change.alert.detail
    waiting = detail[detail.index("Waiting:") :]
    assert f"for rank {culprit}, " in waiting.splitlines()[1], "those waiting for it directly come first"
    assert "mesh_tp" in waiting and "mesh_dp" in waiting
    assert f"{world - 1} ranks wait for it" in change.alert.summary


def _group(gid: str, ranks: list[int], enqueued: int, completed: int, op: str | None, since: float | None):
    return GroupStatus(
        id=gid, backend="gloo", size=len(ranks), ranks=rank_runs(ranks), timeout=1800.0,
        enqueued=enqueued, completed=completed, desc=gid, op=op, since=since,
    )  # fmt: skip


def test_a_cycle_across_two_groups_is_a_deadlock() -> None:
    """Rank 0 entered the world barrier before its TP all-reduce, rank 1 the other way round;
    ranks 2 and 3 wait in the barrier for rank 1."""
    state = JobState(LIMITS)
    t = 1000.0
    tp = [0, 1]
    reports = {
        0: [_group("world", [0, 1, 2, 3], 5, 4, "barrier", t), _group("tp", tp, 9, 9, None, None)],
        1: [_group("world", [0, 1, 2, 3], 4, 4, None, None), _group("tp", tp, 10, 9, "all_reduce", t)],
        2: [_group("world", [0, 1, 2, 3], 5, 4, "barrier", t)],
        3: [_group("world", [0, 1, 2, 3], 5, 4, "barrier", t)],
    }
    for rank, groups in reports.items():
        state.apply(report(rank, t=t + 30, groups=groups), t + 30)
    findings = Detector().evaluate(state, t + 30.5)
    assert [(f.key, f.ranks) for f in findings] == [("hang:cycle", [0, 1])]
    assert "deadlock" in findings[0].summary and "barrier" in findings[0].detail and "all_reduce" in findings[0].detail


def test_a_collective_every_member_issued_is_the_transport() -> None:
    state = JobState(LIMITS)
    t = 1000.0
    for rank in range(4):
        state.apply(report(rank, t=t + 30, groups=[_group("world", [0, 1, 2, 3], 7, 6, "all_reduce", t)]), t + 30)
    (finding,) = Detector().evaluate(state, t + 30.5)
    assert finding.key == "hang:world" and finding.ranks == []
    assert "none behind" in finding.summary and "transport" in finding.detail


def test_a_stalled_pipeline_stage_is_named_alone_not_its_neighbours() -> None:
    """Four stages passing activations by send/recv, stage 2 asleep: stage 1 blocks in a send
    to it, stage 3 in a receive from it, stage 0 behind stage 1. Only stage 2 is the root,
    and no stall alert blames the stages blocked in p2p."""
    sim = SimJob(world=4, layout=Layout(tp=1, pp=4)).hang(2, at=20)
    changes = raised(sim, until=35)
    assert [(c.alert.kind, c.alert.ranks) for _, c in changes] == [("hang", [2])]
    t, change = changes[0]
    assert t - 20 <= 10
    detail = change.alert.detail
    assert "rank 1 in send #101 to rank 2 in group" in detail and "for rank 2" in detail
    assert "rank 3 in recv #101 from rank 2" in detail
    assert "rank 0 in recv #101 from rank 1" in detail and "for rank 1" in detail


def _channel(gid: str, peer: int, direction: str, posted: int, completed: int, blocked_since: float | None = None):
    blocked = completed + 1 if blocked_since is not None else None
    return P2P(
        group=gid, peer=peer, dir=direction, posted=posted, completed=completed,
        pending=blocked, since=blocked_since, blocked=blocked, blocked_since=blocked_since,
    )  # fmt: skip


def _pipeline(channels: dict[int, list[P2P]], t: float) -> JobState:
    state = JobState(LIMITS)
    pp = [_group("pp", [0, 1, 2, 3], 0, 0, None, None)]
    for rank in range(4):
        state.apply(report(rank, t=t + 30, groups=pp, p2p=channels.get(rank, [])), t + 30)
    return state


def test_two_blocking_receives_facing_each_other_are_a_deadlock() -> None:
    """Stages 1 and 2 each receive from the other before sending: a ring of two. Stage 0
    waits for stage 1 in its send, stage 3 for stage 2 in its receive."""
    t = 1000.0
    state = _pipeline(
        {
            0: [_channel("pp", 1, "send", 12, 11, t)],
            1: [_channel("pp", 0, "recv", 11, 11), _channel("pp", 2, "recv", 12, 11, t)],
            2: [_channel("pp", 1, "recv", 12, 11, t), _channel("pp", 3, "send", 11, 11)],
            3: [_channel("pp", 2, "recv", 12, 11, t)],
        },
        t,
    )
    findings = Detector().evaluate(state, t + 30.5)
    assert [(f.key, f.ranks) for f in findings] == [("hang:cycle", [1, 2])]
    detail = findings[0].detail
    assert "rank 1 waits in recv #12 from rank 2" in detail and "rank 2 waits in recv #12 from rank 1" in detail
    assert "sends and receives" in findings[0].summary


def test_a_send_and_its_receive_both_posted_that_never_complete_are_the_transport() -> None:
    t = 1000.0
    state = _pipeline(
        {1: [_channel("pp", 2, "send", 7, 6, t)], 2: [_channel("pp", 1, "recv", 7, 6, t)]},
        t,
    )
    (finding,) = Detector().evaluate(state, t + 30.5)
    assert finding.key == "hang:pp:1>2" and finding.ranks == [1, 2]
    assert "posted on both ends" in finding.summary and "link" in finding.detail


def test_a_receive_from_any_rank_waits_for_the_members_that_wait_for_nobody() -> None:
    t = 1000.0
    state = _pipeline({0: [_channel("pp", -1, "recv", 3, 2, t)], 1: [_channel("pp", 0, "recv", 1, 0, t)]}, t)
    (finding,) = Detector().evaluate(state, t + 30.5)
    assert finding.key == "hang" and finding.ranks == [2, 3]
    assert "recv #3 from any rank" in finding.detail


def test_the_peers_wait_on_a_rank_that_stopped_and_came_back_is_not_straggling() -> None:
    """The seconds the others wait before their stall is flagged belong to the hang; once the
    stopped rank is back, its pace is judged on new samples, and it is not a straggler."""
    sim = SimJob(world=4, interval=0.5).gil(1, at=20)
    monitor = Monitor(Detector(probe=sim.probe))
    kinds = [c.alert.kind for _, c in drive(sim, monitor, until=30) if c.event == "raised"]
    back = SimJob(world=4, interval=0.5)
    for t, raw in back.stream(until=60, since=31):
        monitor.ingest(raw, t)
        kinds += [c.alert.kind for c in monitor.tick(t) if c.event == "raised"]
    assert kinds == ["hang"]


def _seen(pid: int, state: str, syscall: str | None, cpu_per_s: float) -> Seen:
    """Two seconds of looks at ``pid``: its state, the call it sits in, the CPU it uses."""
    first, recent, last = (Sample(pid, t, state, syscall=syscall, cpu=cpu_per_s * t) for t in (0.0, 2.0 - SPAN, 2.0))
    return Seen(first, last, recent)


def _outside(culprit: int, state: str, syscall: str | None, cpu_per_s: float = 0.0) -> Outside:
    """A prober that sees every rank work, and ``culprit`` (pid 10000 + rank) as given."""

    def view(host: str, pid: int) -> Seen:
        if pid == 10_000 + culprit:
            return _seen(pid, state, syscall, cpu_per_s)
        return _seen(pid, "R", "running", 1.0)

    return view


def hangs(sim: SimJob, outside: Outside, until: float = 40) -> list[tuple[float, Change]]:
    """The hang alert's changes, each with the alert as it stood then (an alert is updated in place)."""
    monitor = Monitor(Detector(probe=sim.probe, outside=outside))
    seen: list[tuple[float, Change]] = []
    tick = monitor.tick

    def tick_and_keep(now: float) -> list[Change]:
        changes = tick(now)
        seen.extend((now - sim.start, replace(c, alert=copy(c.alert))) for c in changes if c.alert.kind == "hang")
        return changes

    monitor.tick = tick_and_keep  # type: ignore[method-assign]
    drive(sim, monitor, until)
    return seen


STOPPED_NOW = [
    # (what the prober sees of the culprit, the words of the early warning)
    (("T", None), "rank 3 is stopped (SIGSTOP)"),
    (("S", "clock_nanosleep"), "rank 3 is asleep in clock_nanosleep"),
    (("S", "futex"), "rank 3 is waiting on a lock"),
    (("D", "read"), "rank 3 is asleep in read"),
]


@pytest.mark.parametrize(("seen", "words"), STOPPED_NOW, ids=[w for _, w in STOPPED_NOW])
def test_a_rank_seen_doing_nothing_is_named_early_as_a_warning_then_critical(seen, words) -> None:
    """The others wait for rank 3 and the prober sees it do nothing: named at the early
    threshold, a warning saying what it does, critical at the hang threshold, one alert."""
    changes = hangs(SimJob(world=8).hang(3, at=20), _outside(3, *seen))
    (t, raised), *later = changes
    assert raised.event == "raised" and raised.alert.ranks == [3] and raised.alert.severity == "warning"
    assert raised.alert.summary.startswith(words), raised.alert.summary
    assert "A warning for now" in raised.alert.detail
    hang_at = Thresholds().hang_after(0.2)
    assert t - 20 < hang_at
    critical = [(t, c) for t, c in later if c.alert.severity == "critical"]
    assert critical and critical[0][0] - 20 >= hang_at and critical[0][1].escalated, changes
    assert {c.event for _, c in changes} <= {"raised", "updated"}, "one incident, one alert"


def test_a_rank_named_early_stays_named_while_the_wait_lasts() -> None:
    """A sleeping rank's reporting thread makes it look busy for a second now and then, and
    a prober on a loaded host falls behind: once named, the rank stays named until the wait
    ends: one alert, never resolved and raised again."""
    looks = 0

    def flickering(host: str, pid: int) -> Seen:
        nonlocal looks
        if pid != 10_003:
            return _seen(pid, "R", "running", 1.0)
        looks += 1
        return _seen(pid, "S", "clock_nanosleep", 0.0) if looks % 2 else _seen(pid, "R", "running", 1.0)

    changes = hangs(SimJob(world=8).hang(3, at=20), flickering)
    (t, raised), *_ = changes
    assert raised.alert.severity == "warning" and raised.alert.summary.startswith("rank 3 is asleep"), changes
    assert t - 20 < Thresholds().hang_after(0.2)
    assert [c.event for _, c in changes].count("raised") == 1 and "resolved" not in {c.event for _, c in changes}


def test_a_rank_that_works_waits_for_the_hang_threshold_as_before() -> None:
    """A checkpoint, an evaluation: nothing early; at the hang threshold, a warning that says so."""
    changes = hangs(SimJob(world=8).hang(3, at=20), _outside(3, "R", "running", 1.0))
    t, raised = changes[0]
    assert t - 20 >= Thresholds().hang_after(0.2), changes
    assert raised.alert.severity == "warning" and "is writing a checkpoint" in raised.alert.summary


@pytest.mark.parametrize("world", [8, 64])
def test_a_healthy_job_seen_asleep_everywhere_raises_nothing(world: int) -> None:
    """The waits of a healthy job are too short to look at anyone: even a prober that sees
    every rank asleep (a loaded machine) names no one."""
    sim = SimJob(world=world)
    monitor = Monitor(Detector(probe=sim.probe, outside=lambda host, pid: _seen(pid, "S", "futex", 0.0)))
    assert drive(sim, monitor, until=60) == []


def test_before_the_first_step_nothing_is_named_early() -> None:
    """Start-ups are slow: the early threshold starts with the job's pace."""
    assert Thresholds().early_after(None) == math.inf


def test_a_straggler_short_of_cpu_is_named_so_once_the_prober_has_looked() -> None:
    """Two jobs on too few cores: the rank the others wait for is named, saying its training
    thread waits for a CPU, only once the prober has seen that (a second of looks)."""
    asked: list[float] = []

    def starved(host: str, pid: int) -> Seen | None:
        if pid != 10_004:
            return _seen(pid, "R", "running", 1.0)
        asked.append(0.0)
        if len(asked) == 1:
            return None  # the first call starts the looking
        first, last = (
            Sample(pid, t, "R", syscall="running", cpu=0.5 * t, queued=0.4 * t, load=6.3, cpus=4) for t in (0, 2)
        )
        return Seen(first, last, first)

    sim = SimJob(world=8).straggler(4, 3.0)
    changes = drive(sim, Monitor(Detector(probe=sim.probe, outside=starved)), until=60)
    (raised,) = [c for _, c in changes if c.event == "raised"]
    assert raised.alert.kind == "straggler" and raised.alert.ranks == [4]
    assert raised.alert.summary.startswith("rank 4 is short of CPU: its training thread waited for a CPU 40% of the")
    assert "host load 6.3 on 4 CPUs" in raised.alert.summary, "its host's CPUs, not the monitor's"
    assert "OMP_NUM_THREADS" in raised.alert.detail
    assert len(asked) >= 2, "named after a look, not before"


@pytest.mark.parametrize("behind", [False, True], ids=["keeping-up", "behind"])
def test_ranks_never_heard_from_are_not_blamed_while_the_monitor_is_behind(behind: bool) -> None:
    """Half the ranks' reports never reach the monitor (their sender fell behind, or the
    monitor's intake dropped them) while rank 40 among them hangs: keeping up, the hang names
    those the others wait for; behind (its intake dropping reports every second), it names
    none of them (131,072 simulated ranks at 1 s named thousands of innocent ones before)."""
    sim = SimJob(world=64).hang(40, at=10)
    monitor = Monitor(Detector(probe=sim.probe))
    named = set()
    second = sim.start
    for t, raw in sim.stream(until=30):
        if decode(raw).rank < 32:
            monitor.ingest(raw, t)
        if t >= second + 1:
            second += 1
            if behind:
                monitor.state.refused({"overflow": 100})
            named |= {tuple(c.alert.ranks) for c in monitor.tick(second) if c.alert.kind == "hang"}
    if behind:
        assert named == set(), named
    else:
        assert named and all(min(ranks) >= 32 for ranks in named), named


def test_a_rank_whose_reports_are_held_up_on_the_way_is_not_blamed_for_the_hang() -> None:
    """Rank 5 hangs while rank 3's reports reach the monitor 6 s late (a relay's queue): rank
    3's old news shows it behind in the collective, but only rank 5 is named."""
    sim = SimJob(world=8).hang(5, at=10)
    late = sorted(
        (t + 6.0 if decode(raw).rank == 3 and t >= sim.start + 8 else t, raw) for t, raw in sim.stream(until=30)
    )
    monitor = Monitor(Detector(probe=sim.probe))
    named = set()
    second = sim.start
    for t, raw in late:
        monitor.ingest(raw, t)
        if t >= second + 1:
            second += 1
            named |= {tuple(c.alert.ranks) for c in monitor.tick(second) if c.alert.kind == "hang"}
    assert named == {(5,)}, named


def test_a_rank_stopped_just_after_reporting_a_collective_its_peers_have_finished_is_named_early() -> None:
    """Rank 2's last report, 0.7 s before it was stopped, caught it inside collective #15;
    its peers finished #15 and wait in #26 for it. Once its reports are overdue that old wait
    is over, not a rank waiting: rank 2 is named as soon as the prober sees it stopped."""
    state, t = JobState(LIMITS), 1000.0
    pace = StepStats(n=64, mean=0.05, p50=0.05, max=0.06, last=0.05)

    def sent(rank: int, at: float, group: GroupStatus) -> Report:
        return report(rank, t=at, groups=[group], steps=20, step_time=pace)

    state.apply(sent(2, t - 0.7, _group("world", [0, 1, 2, 3], 15, 14, None, t - 0.7)), t - 0.7)
    for at in (t + 0.1, t + 1.1, t + 2.1):
        for rank in (0, 1, 3):
            state.apply(sent(rank, at, _group("world", [0, 1, 2, 3], 26, 25, "all_reduce", t)), at)
    stopped = Sample(1002, 0.0, "T")

    def outside(host: str, pid: int) -> Seen:
        return Seen(stopped, stopped, stopped, (stopped,)) if pid == 1002 else _seen(pid, "R", "running", 1.0)

    findings = Detector(outside=outside).evaluate(state, t + 2.2)
    assert [(f.kind, f.ranks, f.severity) for f in findings] == [("hang", [2], "warning")], findings
    assert findings[0].summary.startswith("rank 2 is stopped (SIGSTOP)")


def test_ranks_whose_latest_reports_predate_the_wait_are_not_named_for_doing_nothing_in_it() -> None:
    """Rank 1 stops after collective #225; rank 0 waits in #226 from t. Ranks 2-3 last reported
    just before they entered #226 and the prober sees them idle in it, waiting like rank 0:
    what they do says nothing of where they are until a report taken since tells (CI's stop 70
    named them). Once it does, rank 1 is named alone."""
    state, t = JobState(LIMITS), 1000.0
    pace = StepStats(n=64, mean=0.05, p50=0.05, max=0.06, last=0.05)
    world = [0, 1, 2, 3]

    def sent(rank: int, at: float, group: GroupStatus, received: float) -> None:
        state.apply(report(rank, t=at, groups=[group], steps=220, step_time=pace), received)

    for rank in (1, 2, 3):
        sent(rank, t - 0.2, _group("world", world, 225, 225, None, None), t - 0.1)
    for at in (t + 0.1, t + 1.1):
        sent(0, at, _group("world", world, 226, 225, "all_reduce", t), at + 0.1)
    eye_now = t + 1.6
    idle = tuple(Sample(pid, eye_now - 1.5 + 0.25 * k, "S", syscall="futex") for pid in (1002, 1003) for k in range(7))
    stopped = Sample(1001, eye_now, "T")

    def outside(host: str, pid: int) -> Seen:
        if pid == 1001:
            return Seen(stopped, stopped, stopped, (stopped,), now=eye_now)
        looks = tuple(look for look in idle if look.pid == pid)
        return Seen(looks[0], looks[-1], looks[-3], looks, now=eye_now) if looks else _seen(pid, "R", "running", 1.0)

    detector = Detector(outside=outside)
    assert [f.ranks for now in (t + 1.5, t + 1.6) for f in detector.evaluate(state, now) if f.kind == "hang"] == []
    for rank in (2, 3):
        sent(rank, t + 0.8, _group("world", world, 226, 225, "all_reduce", t + 0.05), t + 1.5)
    findings = [f for f in detector.evaluate(state, t + 1.6) if f.kind == "hang"]
    assert [(f.ranks, f.severity) for f in findings] == [([1], "warning")], findings


def test_no_rank_is_named_early_while_a_report_shows_a_wait_in_a_collective_already_completed() -> None:
    """Node B cut off: its ranks 2-3's last reports, come late through its relay, have them wait in
    #613, which ranks 0-1 have completed since; rank 1 waits in #627, rank 0 sits on a lock (its
    gradients' all-reduce cannot complete without node B). Where ranks 2-3 stand now is not
    known: rank 0 is not named early for holding them up (CI's stop 74: a warning naming rank 0
    came before node B's node_lost)."""
    state, t = JobState(LIMITS), 1000.0
    pace = StepStats(n=64, mean=0.05, p50=0.05, max=0.06, last=0.05)
    world = [0, 1, 2, 3]

    def sent(rank: int, at: float, group: GroupStatus, received: float) -> None:
        state.apply(report(rank, t=at, groups=[group], steps=610, step_time=pace), received)

    for rank in (2, 3):
        sent(rank, t - 3.7, _group("world", world, 613, 612, "all_reduce", t - 4.2), t + 1.0)
    for at in (t + 0.1, t + 1.1):
        sent(0, at, _group("world", world, 622, 622, None, None), at + 0.05)
        sent(1, at, _group("world", world, 627, 626, "all_reduce", t - 0.5), at + 0.05)
    eye_now = t + 1.6
    locked = tuple(Sample(1000, eye_now - 1.5 + 0.25 * k, "S", syscall="futex") for k in range(7))

    def outside(host: str, pid: int) -> Seen:
        if pid == 1000:
            return Seen(locked[0], locked[-1], locked[-3], locked, now=eye_now)
        return _seen(pid, "R", "running", 1.0)

    detector = Detector(outside=outside)
    assert [f.ranks for now in (t + 1.5, t + 1.6) for f in detector.evaluate(state, now) if f.kind == "hang"] == []


def test_a_rank_freed_from_its_wait_is_not_named_with_the_culprit_it_waited_for() -> None:
    """Tensor x data parallel, 4 ranks: rank 1 sleeps 15 s before its tensor-parallel all-reduce
    #22, its peer rank 0 waits in it, and ranks 2-3 wait in their data-parallel #26 for ranks 0
    and 1. Rank 1 wakes: both complete #22, and for a moment neither has reached #26, on which
    ranks 2-3 still wait. Rank 0 was a victim all along, not a culprit caught up with (CI's stop
    75: the hang alert naming rank 1 turned to name ranks 0-1 the second before it resolved)."""
    state, t = JobState(LIMITS), 1000.0
    pace = StepStats(n=64, mean=0.05, p50=0.05, max=0.06, last=0.05)
    world = [0, 1, 2, 3]
    tp = {0: ("tp0", [0, 1]), 1: ("tp0", [0, 1]), 2: ("tp1", [2, 3]), 3: ("tp1", [2, 3])}
    dp = {0: ("dp0", [0, 2]), 1: ("dp1", [1, 3]), 2: ("dp0", [0, 2]), 3: ("dp1", [1, 3])}
    began = t - 15.0

    def sent(rank: int, at: float, tp_done: bool, waiting: bool) -> None:
        (tp_id, tp_ranks), (dp_id, dp_ranks) = tp[rank], dp[rank]
        in_tp = not tp_done and rank == 0
        groups = [
            _group(tp_id, tp_ranks, 22 if (tp_done or in_tp) else 21, 22 if tp_done else 21,
                   "all_reduce" if in_tp else None, began if in_tp else None),
            _group(dp_id, dp_ranks, 26 if waiting else 25, 25, "all_reduce" if waiting else None,
                   began if waiting else None),
        ]  # fmt: skip
        stalled = began if rank == 1 and not tp_done else None
        state.apply(report(rank, t=at, groups=groups, steps=20, step_time=pace, stalled_since=stalled), at + 0.05)

    for at in [began + k for k in range(16)]:
        for rank in world:
            sent(rank, at, tp_done=rank in (2, 3), waiting=rank in (2, 3))
    for rank in (0, 1):  # rank 1 woke: #22 completes on both, #26 not yet entered
        sent(rank, t + 0.3, tp_done=True, waiting=False)
    named = [f.ranks for f in Detector().evaluate(state, t + 0.5) if f.kind == "hang"]
    assert all(0 not in ranks for ranks in named), named
    assert named == [[1]]


def test_a_wait_is_as_long_as_its_reports_saw_it_last_not_until_the_report_after() -> None:
    """A report caught rank 1 a moment into an all-reduce; the next, a second later, finds it out
    of it and asleep: it came out of a short wait, nothing to catch up from (CI's stop 75: a rank
    asleep, taken for one catching up, was named only at the hang threshold, not early). A wait
    its reports showed for 15 s is one."""
    state, t, world = JobState(LIMITS), 1000.0, [0, 1, 2, 3]
    state.apply(report(1, t=t, groups=[_group("world", world, 41, 40, "all_reduce", t - 0.05)], steps=40), t)
    state.apply(report(1, t=t + 1, groups=[_group("world", world, 41, 41, None, None)], steps=41), t + 1)
    for at in (t - 15, t):
        state.apply(report(2, t=at, groups=[_group("world", world, 41, 40, "all_reduce", t - 15)], steps=40), at)
    state.apply(report(2, t=t + 1, groups=[_group("world", world, 41, 41, None, None)], steps=41), t + 1)
    ranks = np.array([1, 2])
    assert state.freed(ranks, t + 1.5, lasted=0.5, within=10.0).tolist() == [False, True]


def test_every_rank_waiting_for_the_culprit_is_counted_as_the_hang_turns_critical() -> None:
    """Ranks 0 and 1 entered the all-reduce 0.4 s apart, a tick of the monitor between them;
    rank 2 never did. Each waits for it from its own moment, and the alert counts both at every
    update, the one that pages included (counted once past the threshold, rank 1 was left out of
    the alert as it turned critical)."""
    t0, step = 1_700_000_000.0, StepStats(n=50, mean=0.1, p50=0.1, max=0.1, last=0.1)

    def group(enqueued: int, since: float | None) -> GroupStatus:
        return GroupStatus("0", "gloo", 3, [[0, 3, 1]], 600.0, enqueued, 20, op="all_reduce", since=since)

    monitor = Monitor(Detector(probe=lambda host, pid: "alive"))
    monitor.ingest(encode(report(2, 3, t=t0, steps=50, step_time=step, groups=[group(20, None)])), t0)
    summaries = []
    for n, t in enumerate(t0 + i / 2 for i in range(1, 49)):
        for rank, entered in ((0, t0 + 0.9), (1, t0 + 1.3)):
            if t >= entered:
                waits = {"steps": 50, "step_time": step, "groups": [group(21, entered)], "stalled_since": entered}
                monitor.ingest(encode(report(rank, 3, t=t, n=n, interval=0.5, **waits)), t)
        if n % 2:
            summaries += [c.alert.summary for c in monitor.tick(t) if c.alert.kind == "hang"]
    counted = {n for summary in summaries for n in re.findall(r"(\d+) ranks? waits? for it", summary)}
    assert summaries and counted == {"2"}, summaries


def test_a_rank_waiting_for_a_waiter_in_another_group_is_counted_as_the_hang_turns_critical() -> None:
    """Rank 1 never enters the tensor-parallel all-reduce that rank 0 waits in; rank 2 waits
    0.4 s later in the data-parallel one, for rank 0. Both wait for rank 1 at every update of
    the alert, the one that pages included (a fresh-clone run of test_analyze_jobs paged "1 rank
    waits for it": rank 2's wait, a few milliseconds younger than rank 0's, had not reached the
    threshold at the tick rank 0's did)."""
    t0, step = 1_700_000_000.0, StepStats(n=50, mean=0.1, p50=0.1, max=0.1, last=0.1)

    def group(gid: str, ranks: list[int], enqueued: int, since: float | None) -> GroupStatus:
        return GroupStatus(gid, "gloo", 2, [ranks], 600.0, enqueued, 20, op="all_reduce", since=since)

    tp, dp = ("tp", [0, 2, 1]), ("dp", [0, 2, 2])
    monitor = Monitor(Detector(probe=lambda host, pid: "alive"))
    monitor.ingest(encode(report(1, 3, t=t0, steps=50, step_time=step, groups=[group(*tp, 20, None)])), t0)
    summaries = []
    for n, t in enumerate(t0 + i / 2 for i in range(1, 49)):
        for rank, entered, groups in (
            (0, t0 + 0.9, [group(*tp, 21, t0 + 0.9), group(*dp, 20, None)]),
            (2, t0 + 1.3, [group(*dp, 21, t0 + 1.3)]),
        ):
            if t >= entered:
                waits = {"steps": 50, "step_time": step, "groups": groups, "stalled_since": entered}
                monitor.ingest(encode(report(rank, 3, t=t, n=n, interval=0.5, **waits)), t)
        if n % 2:
            summaries += [c.alert.summary for c in monitor.tick(t) if c.alert.kind == "hang"]
    assert summaries and all(s.startswith("rank 1 ") for s in summaries), summaries
    counted = {n for summary in summaries for n in re.findall(r"(\d+) ranks? waits? for it", summary)}
    assert counted == {"2"}, summaries
