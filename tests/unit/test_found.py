"""A job found from outside (:mod:`distmon.monitor.rules.found`), on streams of the reports a
node's eye writes for ranks it found (:mod:`distmon.node.found_ranks`): where their stacks stand,
since when, and what their processes do, judged in the hang's words; and the eye's own reading
of stillness from successive looks."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

import pytest

from distmon import wire
from distmon.monitor.outside.sight import Seen
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.alerts import CRITICAL, WARNING, Alert
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.words import stackless_words
from distmon.node import found_ranks, proc
from distmon.node.finder import Found, FoundRank
from distmon.node.looks import SEEN, SSH, Reached
from distmon.node.prober import CLOSE_PERIOD
from distmon.node.proc import Sample
from distmon.node.pyspy import Sampled
from distmon.wire import GONE, ExitInfo, Outside, Report, StackFrame
from tests.support.messages import T0, report
from tests.support.waiting import wait_until

TRAIN = "/home/me/train.py"
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TIME = "/usr/lib/python3.11/threading.py"


def frames(*inner: tuple[str, int, str], line: int = 50, func: str = "train_step") -> list[StackFrame]:
    """The training thread's stack: ``main`` at train.py:90, the user's frame, then ``inner``."""
    user = [StackFrame(TRAIN, 90, "main"), StackFrame(TRAIN, line, func)]
    return user + [StackFrame(file, at, name) for file, at, name in inner]


ALL_REDUCE = frames((C10D, 2501, "all_reduce"))
INIT = frames((C10D, 1600, "init_process_group"), (C10D, 1800, "_new_process_group_helper"), line=30, func="setup")
BARRIER = frames((C10D, 4200, "barrier"), line=61, func="evaluate")
ASLEEP = frames(line=40, func="inject")


def recv(src: int) -> list[StackFrame]:
    return frames((C10D, 2300, "recv"), line=70, func="stage")


Where = tuple[list[StackFrame] | None, float | None, int | None]
"""A found rank at one moment: its stack, since when it stood still (None: moving), the peer
its send or receive names."""


class Eye:
    """What the monitor's host's eye sees of each rank's process: asleep (``S`` in a call that
    does not return, no CPU), or at work."""

    def __init__(self, asleep: dict[int, str]) -> None:
        self.asleep, self.now = asleep, T0

    def __call__(self, host: str, pid: int) -> Seen:
        rank, looks = pid - 1000, []
        for i in range(9):
            t = self.now - 2.0 + i * CLOSE_PERIOD
            call = self.asleep.get(rank)
            looks.append(Sample(pid, t, "S" if call else "R", syscall=call or "running", cpu=0.0 if call else t))
        return Seen(looks[0], looks[-1], looks[-5], tuple(looks))


def found_report(rank: int, t: float, where: Where, world: int = 4) -> Report:
    stack, since, peer, *spinning = where
    outside = wire.Outside(launcher=999, peer=peer, stood_since=spinning[0] if spinning else since)
    return report(rank, world, t=t, stack=stack, stalled_since=since, outside=outside)


def run(
    job: dict[int, object], outside: Eye, seconds: float, world: int = 4, told: tuple[float, Reached] | None = None
) -> list[Alert]:
    """Each rank of ``job`` reports once a second for ``seconds`` as ``job[rank](t)`` says
    (a :data:`Where`, :data:`NOT_YET`, or None once its process is gone), a node reached
    ``told`` of at its time; every alert raised, as it last stood."""
    monitor = Monitor(Detector(probe=lambda host, pid: "alive", outside=outside))
    alerts: dict[str, Alert] = {}
    gone: set[int] = set()
    for step in range(int(seconds)):
        t = T0 + step
        outside.now = t
        if told is not None and told[0] == t:
            monitor.state.told.fared([told[1]], t)
        for rank, where in job.items():
            said = where(t)  # type: ignore[operator]
            if said is NOT_YET:
                continue
            if said is not None:
                monitor.ingest(wire.encode(found_report(rank, t, said, world)), t)
            elif rank not in gone:  # the eye's last report for it
                gone.add(rank)
                last = report(rank, world, t=t, exit=ExitInfo(GONE, t), outside=wire.Outside(999))
                monitor.ingest(wire.encode(last), t)
        for change in monitor.tick(t + 0.5):
            alerts[change.alert.key] = change.alert
    return list(alerts.values())


NOT_YET = ("not yet",)
"""A found rank its node's eye has not reported yet."""


def later(where: Callable[[float], Where], from_t: float) -> Callable[[float], object]:
    """A rank ``where`` tells of, whose node's eye reports it from ``from_t`` on."""
    return lambda t: where(t) if t >= from_t else NOT_YET


def waiting(stack: list[StackFrame], from_t: float = T0 + 1, peer: int | None = None) -> Callable[[float], Where]:
    """A rank that reaches ``stack`` at ``from_t`` and stands still there (moving before)."""

    def where(t: float) -> Where:
        if t < from_t:
            return frames(line=int(t) % 7 + 20), None, None
        return stack, from_t if t - from_t >= wire.STALL_FLOOR else None, peer

    return where


def spinning(stack: list[StackFrame], from_t: float = T0 + 1) -> Callable[[float], Where]:
    """A rank that reaches ``stack`` at ``from_t`` and stays there, busy: it stands there, and
    makes progress, as far as the outside can tell."""

    def where(t: float) -> Where:
        if t < from_t:
            return frames(line=int(t) % 7 + 20), None, None
        return stack, None, None, from_t if t - from_t >= wire.STALL_FLOOR else None  # type: ignore[return-value]

    return where


def moving(t: float) -> Where:
    return frames(line=int(t * 10) % 7 + 20), None, None


def test_a_rank_asleep_while_the_others_wait_in_a_collective_is_named_alone_in_the_hangs_words() -> None:
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: waiting(ASLEEP), 3: waiting(ALL_REDUCE)}
    alerts = run(job, Eye({2: "clock_nanosleep"}), 12)
    (hang,) = alerts
    assert hang.kind == "hang" and hang.ranks == [2] and hang.severity == CRITICAL
    assert hang.summary.startswith("rank 2 is asleep in clock_nanosleep; 3 ranks wait for it, in all_reduce at ")
    assert f"{TRAIN}:50 in train_step" in hang.summary
    assert "found without the hook" in hang.detail and "your code: /home/me/train.py:40 in inject" in hang.detail


def test_named_early_as_a_warning_once_seen_doing_nothing() -> None:
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: waiting(ASLEEP), 3: waiting(ALL_REDUCE)}
    alerts = run(job, Eye({2: "clock_nanosleep"}), 5)
    (hang,) = alerts
    assert hang.ranks == [2] and hang.severity == WARNING and "A warning for now" in hang.detail


def test_a_rank_at_work_while_the_others_wait_is_a_warning_saying_so() -> None:
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: moving, 3: waiting(ALL_REDUCE)}
    alerts = run(job, Eye({}), 12)
    (hang,) = alerts
    assert hang.ranks == [2] and hang.severity == WARNING and "making progress" in hang.detail


def test_a_healthy_job_whose_ranks_move_raises_nothing() -> None:
    assert run(dict.fromkeys(range(4), moving), Eye({}), 30) == []


def test_ranks_in_a_collective_the_others_are_not_in_are_named_with_both_places() -> None:
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: waiting(ALL_REDUCE), 3: waiting(BARRIER)}
    (divergence,) = run(job, Eye({}), 8)
    assert divergence.kind == "divergence" and divergence.ranks == [3]
    assert divergence.summary == (
        f"rank 3 in barrier at {TRAIN}:61 in evaluate, the others in all_reduce at {TRAIN}:50 in train_step"
    )


def test_every_rank_idle_in_one_collective_is_a_hang_no_rank_causes() -> None:
    (stuck,) = run(dict.fromkeys(range(4), waiting(ALL_REDUCE)), Eye({}), 12)
    assert stuck.kind == "hang" and stuck.ranks == [] and stuck.severity == CRITICAL
    assert stuck.summary.startswith(f"all ranks of the job stuck in all_reduce at {TRAIN}:50 in train_step for ")
    assert "the transport or a device" in stuck.detail


def test_two_ranks_each_receiving_from_the_other_are_a_deadlock() -> None:
    job = {0: waiting(recv(1), peer=1), 1: waiting(recv(0), peer=0)}
    (deadlock,) = run(job, Eye({}), 8, world=2)
    assert deadlock.key == "hang:cycle" and deadlock.ranks == [0, 1]
    assert deadlock.summary.startswith("deadlock: ranks 0-1 wait for each other: their sends and receives")
    assert f"recv from rank 1 at {TRAIN}:70 in stage" in deadlock.detail


def test_a_job_whose_processes_all_end_together_names_no_one() -> None:
    def ends(t: float) -> Where | None:
        return None if t >= T0 + 5 else moving(t)

    monitor_alerts = run(dict.fromkeys(range(4), ends), Eye({}), 15)
    assert monitor_alerts == []


def test_a_rank_gone_while_the_others_run_on_is_lost() -> None:
    """The others run on into the next collective, and wait there for the rank gone."""

    def ends(t: float) -> Where | None:
        return None if t >= T0 + 5 else moving(t)

    stuck = waiting(ALL_REDUCE, from_t=T0 + 5)
    (lost,) = run({0: stuck, 1: ends, 2: stuck, 3: stuck}, Eye({}), 15)
    assert lost.kind == "rank_lost" and lost.ranks == [1]
    assert "while ranks 0, 2-3 run on" in lost.summary


class GoneEye(Eye):
    """An eye on this host that finds rank 0's process gone while its node's eye still reports
    where it last stood (its report of the end not sent yet)."""

    def __call__(self, host: str, pid: int) -> Seen:
        seen = super().__call__(host, pid)
        return replace(seen, last=None, recent=None, looks=()) if pid == 1000 else seen


def test_a_rank_seen_gone_before_its_eye_says_so_is_lost_not_a_hang() -> None:
    """Seen gone by a look of its own while its node's eye still shows it where it stood: the others'
    wait is not the hang's to page (at a job's end, its processes end in no telling order); once the
    eye tells of the end and the others run on without it, the rank is lost."""

    def ends(t: float) -> Where | None:
        return None if t >= T0 + 12 else waiting(ASLEEP)(t)

    stuck = waiting(ALL_REDUCE)
    alerts = run({0: ends, 1: stuck, 2: stuck, 3: stuck}, GoneEye({}), 20)
    assert [(a.kind, a.ranks) for a in alerts] == [("rank_lost", [0])], alerts


def test_rank_0_working_on_alone_after_the_others_ended_is_a_job_ending_well() -> None:
    """Rank 0 saves the model, or uploads its metrics, after the others finished: nobody waits
    for the ranks gone."""

    def ends(t: float) -> Where | None:
        return None if t >= T0 + 5 else moving(t)

    assert run({0: moving, 1: ends, 2: ends, 3: ends}, Eye({}), 15) == []


def test_a_rank_that_reports_itself_is_not_reported_for() -> None:
    """Once a rank's hook reports, its node's eye's reports for it are not taken in."""
    monitor = Monitor(Detector())
    monitor.ingest(wire.encode(found_report(1, T0, (ASLEEP, None, None))), T0)
    assert monitor.state.found()[1]
    monitor.ingest(wire.encode(report(1, t=T0 + 1, steps=40)), T0 + 1)
    monitor.ingest(wire.encode(found_report(1, T0 + 2, (ASLEEP, None, None))), T0 + 2)
    assert not monitor.state.found()[1] and monitor.state.ranks[1].report.steps == 40


def test_bit_128_with_an_exception_is_no_found_rank() -> None:
    """Ranks before issue 42 set bit 128 on an exception they judged a consequence."""
    assert wire.found_in_flags(wire.FLAG_FOUND) and not wire.found_in_flags(wire.FLAG_FOUND | wire.FLAG_RAISED)
    raw = wire.encode(found_report(0, T0, (ASLEEP, None, None)))
    assert raw[1] & wire.FLAG_FOUND and wire.decode(raw).outside == Outside(launcher=999)


SYNC = frames(line=55, func="sync")
"""A rank spinning at its sync point, waiting for an all-reduce that returned at once (a GPU's
wait: not inside ``torch.distributed``)."""


def test_ranks_standing_at_one_sync_point_wait_and_the_rank_elsewhere_is_named() -> None:
    """On a GPU, the waiters block at a later sync point, busy, all at one line of their code."""
    job = {0: spinning(SYNC), 1: spinning(SYNC), 2: waiting(ASLEEP), 3: spinning(SYNC)}
    (hang,) = run(job, Eye({2: "clock_nanosleep"}), 12)
    assert hang.ranks == [2] and hang.severity == CRITICAL
    assert hang.summary.startswith("rank 2 is asleep in clock_nanosleep; 3 ranks wait for it, in a sync point ")
    assert f"at {TRAIN}:55 in sync" in hang.summary


def test_two_ranks_each_at_its_own_line_are_no_sync_point() -> None:
    """Half at one line, half at another: which of them waits cannot be told."""
    job = {0: spinning(SYNC), 1: spinning(SYNC), 2: waiting(ASLEEP), 3: waiting(ASLEEP)}
    assert [a for a in run(job, Eye({2: "clock_nanosleep", 3: "clock_nanosleep"}), 12) if a.ranks] == []


def test_every_rank_busy_at_one_line_is_work_not_a_hang() -> None:
    """Every rank in one long call (an evaluation, a big matmul): nobody stands elsewhere."""
    assert run(dict.fromkeys(range(4), spinning(SYNC)), Eye({}), 20) == []


def test_ranks_seen_waiting_for_ranks_not_seen_blame_nobody_and_say_where_to_look() -> None:
    """A node of the job not looked at: the ranks here wait on their peers, none of them behind."""
    (hang,) = run({0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE)}, Eye({}), 12, world=4)
    assert hang.key == "hang:unseen" and hang.ranks == [] and hang.severity == CRITICAL
    assert hang.summary.startswith("ranks 0-1 wait, in all_reduce at ")
    assert hang.summary.endswith("whom for is not seen (ranks 2-3, on other nodes)")
    assert "The job has 4 ranks: ranks 2-3 were not seen" in hang.detail
    assert "distmon look --hosts NODE,..." in hang.detail


def test_a_rank_seen_at_work_beside_the_rank_seen_asleep_is_not_paged() -> None:
    """Both stand outside the collective the others wait in; one is asleep in it, the other
    moves (its stack changes, its process runs): the page names the one asleep."""
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: waiting(ASLEEP)}
    job[3] = lambda t: (frames(line=int(t) % 7 + 20), None, None)
    (hang,) = run(job, Eye({2: "clock_nanosleep"}), 12)
    assert hang.ranks == [2] and hang.severity == CRITICAL


@pytest.mark.parametrize("rank_0", ["futex_wait", None], ids=["idle", "working"])
def test_a_rank_just_moved_on_from_the_collective_is_no_culprit_of_the_wait_its_peers_are_still_seen_in(
    rank_0: str | None,
) -> None:
    """Rank 2's sleep ends as the eye looks, seconds behind on a loaded host: ranks 1 and 3 are
    still seen where they waited and rank 2 just came into the collective, while rank 0, seen in
    it all along, is now seen at the next line, its stack new there. Whether its process is seen
    asleep there (in the next collective, which the stack has yet to show) or at work, it moved:
    it is not what the others waited for, and the alert still names rank 2."""
    woke = T0 + 12

    def rank_0_moves(t: float) -> Where:
        return waiting(ALL_REDUCE)(t) if t < woke else (frames(line=52), None, None)

    def rank_2_wakes(t: float) -> Where:
        return waiting(ASLEEP)(t) if t < woke else (ALL_REDUCE, None, None)

    job = {0: rank_0_moves, 1: waiting(ALL_REDUCE), 2: rank_2_wakes, 3: waiting(ALL_REDUCE)}
    asleep = {2: "clock_nanosleep"} | ({0: rank_0} if rank_0 else {})
    alerts = run(job, Eye(asleep), 15)
    assert [a.ranks for a in alerts if a.kind == "hang"] == [[2]], alerts


class WakingEye(Eye):
    """An eye that sees rank 2 asleep until ``woke``, then every rank at work."""

    def __init__(self, woke: float) -> None:
        super().__init__({2: "clock_nanosleep"})
        self.woke = woke

    def __call__(self, host: str, pid: int) -> Seen:
        self.asleep = {} if self.now >= self.woke else {2: "clock_nanosleep"}
        return super().__call__(host, pid)


def test_ranks_seen_moving_on_from_the_wait_as_the_incident_ends_are_not_its_culprits() -> None:
    """Rank 2's sleep ends: it works on, and so do ranks 0 and 3, seen leaving the all-reduce they
    stood in all along, while rank 1 is still seen in it (the eye is seconds behind). Ranks 0 and 3
    moved on from the wait: they catch up, and the alert, as it last stands, still names rank 2."""
    woke = T0 + 14

    def moves_on_at(t_moves: float) -> Callable[[float], Where]:
        return lambda t: waiting(ALL_REDUCE)(t) if t < t_moves else moving(t)

    job = {0: moves_on_at(woke), 1: moves_on_at(woke + 3), 2: moves_on_at(woke), 3: moves_on_at(woke)}
    job[2] = lambda t: waiting(ASLEEP)(t) if t < woke else moving(t)
    alerts = run(job, WakingEye(woke), 17)
    assert [a.ranks for a in alerts if a.kind == "hang"] == [[2]], alerts


def test_ranks_a_node_reached_found_are_awaited_before_whom_for_is_called_not_seen() -> None:
    """``distmon look`` on a loaded host: node-b's eye found ranks 2-3 as it answered, and their
    first reports come seconds later. The ranks here wait for them meanwhile: one incident, the
    hang named once they come (not first "whom for is not seen", then the culprit)."""
    job = {0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE), 2: later(waiting(ALL_REDUCE), T0 + 9)}
    job[3] = later(waiting(ASLEEP), T0 + 9)
    reached = Reached("node-b", SSH, SEEN, "", (2, 3))
    (hang,) = run(job, Eye({3: "clock_nanosleep"}), 14, told=(T0 + 5, reached))
    assert hang.key == "hang" and hang.ranks == [3] and hang.severity == CRITICAL


def test_ranks_a_node_reached_found_that_never_report_are_not_seen_a_hang_later() -> None:
    """Their eye said it found them, and no report came: whom for is not seen, a hang threshold
    after the node was told of."""
    reached = Reached("node-b", SSH, SEEN, "", (2, 3))
    (hang,) = run({0: waiting(ALL_REDUCE), 1: waiting(ALL_REDUCE)}, Eye({}), 14, told=(T0 + 5, reached))
    assert hang.key == "hang:unseen" and hang.ranks == [] and hang.t >= T0 + 5 + Thresholds().hang_after(0.0)


def test_a_rank_seen_holding_up_the_others_is_named_and_the_ranks_not_seen_are_said() -> None:
    job = {0: waiting(ALL_REDUCE), 1: waiting(ASLEEP)}
    (hang,) = run(job, Eye({1: "clock_nanosleep"}), 12, world=4)
    assert hang.ranks == [1] and "Not seen: ranks 2-3, on nodes not looked at" in hang.detail


def test_a_job_named_before_it_reported_takes_its_world_size_from_its_first_report() -> None:
    monitor = Monitor(Detector(), job="job")
    monitor.ingest(wire.encode(found_report(0, T0, (ASLEEP, None, None), world=4)), T0)
    assert monitor.state.world == 4


# The eye's reading of its looks: since when a rank has made no progress seen from outside.

RANK = FoundRank(pid=4242, rank=2, world=4, local_rank=2, job="job", started=1, launcher=999)


def sampled(stack: list[StackFrame], gil: bool = False) -> Sampled:
    return Sampled(stack, [{} for _ in stack], owns_gil=gil)


def stood(looks: list[tuple[Sampled | None, tuple[float, int] | None]]) -> list[float | None]:
    w = found_ranks._Watched(RANK)
    return [found_ranks._stood(w, taken, progress, T0 + i) for i, (taken, progress) in enumerate(looks)]


def test_a_thread_asleep_at_the_same_stack_stands_still_after_three_looks_and_two_seconds() -> None:
    assert stood([(sampled(ASLEEP), (1.0, 10))] * 4) == [None, None, T0, T0]


def test_a_thread_at_the_same_line_at_every_look_that_works_between_moves() -> None:
    """A step spends most of its time in backward: the stack is the same at every look, and
    the thread runs and wakes between them."""
    looks = [(sampled(ALL_REDUCE), (1.0 + i * 0.3, 10 + 40 * i)) for i in range(5)]
    assert stood(looks) == [None] * 5


def test_a_thread_holding_the_gil_in_one_call_stands_still_though_it_burns_cpu() -> None:
    looks = [(sampled(ASLEEP, gil=True), (1.0 + i, 10)) for i in range(4)]
    assert stood(looks) == [None, None, T0, T0]


def test_a_process_stopped_holding_the_gil_is_told_stopped_not_holding_it() -> None:
    """SIGSTOP froze the thread with the GIL it had: the stop is what the rules must tell (a
    loaded eye's looks may lag the stop's)."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        child.send_signal(signal.SIGSTOP)
        wait_until(lambda: in_state(child.pid, "Tt"), 10, "the child stopped")
        holding = sampled(ASLEEP, gil=True)
        assert not found_ranks._holds_gil(holding, proc.look(child.pid, time.monotonic()))
        child.send_signal(signal.SIGCONT)
        wait_until(lambda: in_state(child.pid, "SR"), 10, "the child continued")
        assert found_ranks._holds_gil(holding, proc.look(child.pid, time.monotonic()))
        assert not found_ranks._holds_gil(sampled(ASLEEP), proc.look(child.pid, time.monotonic()))
    finally:
        child.kill()
        child.wait()


def test_a_main_thread_asleep_neither_runs_nor_wakes_between_two_looks() -> None:
    """The counters the eye's stillness reads (:func:`distmon.node.proc.thread_counters`), on
    a real process asleep and then gone."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        wait_until(lambda: in_state(child.pid, "S"), 10, "the child asleep")
        before = proc.thread_counters(child.pid, child.pid)
        time.sleep(0.3)
        after = proc.thread_counters(child.pid, child.pid)
        assert before is not None and after is not None
        assert found_ranks._asleep(before, after), (before, after)
    finally:
        child.kill()
        child.wait()
    assert proc.thread_counters(child.pid, child.pid) is None


def in_state(pid: int, states: str) -> bool:
    look = proc.look(pid, time.monotonic())
    return look is not None and look.state in states


def test_a_rank_that_spawn_or_init_process_group_numbered_is_read_off_its_stack() -> None:
    spawn = "/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py"
    process = "/usr/lib/python3.11/multiprocessing/process.py"
    wrapped = [StackFrame(process, 108, "run"), StackFrame(spawn, 90, "_wrap"), *ASLEEP]
    unknown = replace(RANK, rank=None, world=4, spawned=True)
    w = found_ranks._Watched(unknown)
    args = [{} for _ in wrapped]
    args[1] = {"fn": "<function demo>", "i": "3", "args": "(4,)"}
    found_ranks._identify(w, {RANK.pid: Sampled(wrapped, args)})
    assert w.identity == (3, 4)
    joining = [*frames(line=30, func="setup"), StackFrame(C10D, 1600, "init_process_group")]
    args = [{} for _ in joining]
    args[-1] = {"backend": "'gloo'", "rank": "5", "world_size": "8"}
    w = found_ranks._Watched(replace(unknown, spawned=False))
    found_ranks._identify(w, {RANK.pid: Sampled(joining, args)})
    assert w.identity == (5, 8)
    other = [StackFrame(process, 108, "run"), StackFrame("/app/pool.py", 10, "work")]
    w = found_ranks._Watched(unknown)
    found_ranks._identify(w, {RANK.pid: Sampled(other, [{} for _ in other])})
    assert w.identity is None and w.not_a_rank


def test_a_slow_stack_delays_no_other_ranks_report() -> None:
    """Each found rank's look stands on its own: one py-spy that hangs leaves that rank on its
    last stack, and the others report on time."""
    slow, ranks = threading.Event(), [replace(RANK, pid=5000 + r, rank=r) for r in range(3)]

    class Finder:
        parents: ClassVar[dict[int, int]] = {}

        def scan(self) -> Found:
            return Found({"job": ranks})

    def sampler(pid: int) -> dict[int, Sampled] | str:
        if pid == 5001:
            slow.wait(30)
        return {pid: sampled(ASLEEP)}

    eye = found_ranks.FoundRanks("host", interval=0.2, finder=Finder(), sampler=sampler)  # type: ignore[arg-type]
    try:
        reports: list[Report] = []
        wait_until(lambda: bool(reports.extend(map(wire.decode, eye.take()))) or len(reports) >= 6, 10, "reports")
        assert {r.rank for r in reports} == {0, 1, 2}
        assert all(r.stack == ASLEEP for r in reports if r.rank != 1)
    finally:
        slow.set()
        eye.close()


def test_a_torn_or_refused_stack_changes_nothing() -> None:
    looks = [
        (sampled(ASLEEP), (1.0, 10)),
        (None, (1.0, 10)),
        (sampled(ASLEEP), (1.0, 10)),
        (sampled(ASLEEP), (1.0, 10)),
    ]
    assert stood(looks) == [None, None, None, T0]


def test_the_peer_of_a_receive_and_the_worker_id_are_read_off_the_arguments() -> None:
    stack = recv(3)
    args = [{} for _ in stack]
    args[-1] = {"tensor": "<Tensor>", "src": "3", "group": "None"}
    assert found_ranks._peer(Sampled(stack, args)) == 3
    args[-1] = {"src": "None"}
    assert found_ranks._peer(Sampled(stack, args)) == wire.ANY_SOURCE
    worker = [StackFrame("/venv/site-packages/torch/utils/data/_utils/worker.py", 300, "_worker_loop")]
    assert found_ranks._worker_id(Sampled(worker, [{"worker_id": "1"}])) == 1
    assert found_ranks._peer(Sampled(ASLEEP, [{} for _ in ASLEEP])) is None


def test_a_report_for_a_found_rank_round_trips() -> None:
    sent = found_report(2, T0, (ASLEEP, T0 - 3, None))
    got = wire.decode(wire.encode(replace(sent, outside=Outside(999, None, True, "refused"))))
    assert got.outside == Outside(999, None, True, "refused") and got.stack == ASLEEP


def test_ranks_whose_stacks_could_not_be_taken_are_said_so_with_why() -> None:
    monitor = Monitor(Detector())
    refused = "permission denied tracing pid 1001: a container needs CAP_SYS_PTRACE"
    for rank in range(2):
        blind = report(rank, 2, t=T0, outside=wire.Outside(999, stack_error=refused))
        monitor.ingest(wire.encode(blind), T0)
    ranks, why = monitor.state.stackless(T0 + 1)
    assert ranks.tolist() == [0, 1] and why == refused
    assert (
        stackless_words(ranks.tolist(), why) == f"ranks 0-1: their stacks could not be taken from outside ({refused})"
    )


def test_ranks_waiting_to_join_wait_for_a_slow_start_as_a_hooked_jobs_do() -> None:
    """In ``init_process_group`` the others wait for a rank loading a checkpoint or a node slow to
    come: named as a warning once they have waited the init wait, critical at the start-up's."""
    job = {0: waiting(INIT), 1: waiting(ASLEEP), 2: waiting(INIT), 3: waiting(INIT)}
    assert run(job, Eye({1: "clock_nanosleep"}), 9) == []
    (warning,) = run(job, Eye({1: "clock_nanosleep"}), 14)
    assert warning.ranks == [1] and warning.severity == WARNING
    assert f"in init_process_group at {TRAIN}:30 in setup" in warning.summary
    (hang,) = run(job, Eye({1: "clock_nanosleep"}), 34)
    assert hang.severity == CRITICAL
