"""distmon/monitor/rules/nodes.py on simulated two-node jobs: a node that fails is one alert
naming it and its ranks; a relay that dies while its ranks train on is a warning naming none."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest

from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import CRITICAL, WARNING, Change
from distmon.monitor.state.ending import fates, rank_ending
from distmon.monitor.state.words import time_of_day
from distmon.node import looks as eye_looks
from distmon.node.links import IB, NET, Link
from distmon.node.looks import Looks
from distmon.node.proc import Sample
from distmon.wire import ExitInfo, decode, encode
from distmon.wire.sockets import Batch, Relay
from tests.support.paths import DATA
from tests.support.simulate import SimJob

CUT = 20
"""The second node B's relay or link goes."""
NODE_A, NODE_B = Relay("node000:1", "node000"), Relay("node001:1", "node001")


def elsewhere(host: str, pid: int) -> None:
    """The prober of a monitor on a head node: it sees none of the ranks' processes."""
    return None


def run(
    sim: SimJob,
    until: int,
    heard: Callable[[int, int], bool],
    relays: Callable[[int], list[Relay]] | None = None,
    monitor: Monitor | None = None,
    since: int = 0,
    eyes: Callable[[int], list[Looks]] | None = None,
) -> tuple[Monitor, list[tuple[float, Change]]]:
    """Feed ``sim`` second by second from ``since``, each rank's frame only if ``heard(rank, second)``: through
    the relays ``relays(second)`` lists as alive (two ranks a node, a batch a relay at the
    second's end), or straight to the monitor at each frame's time without ``relays``; what
    the nodes' eyes say in that second (``eyes(second)``) with them; a tick at each second's
    end. Returns the monitor and every alert change, at its second."""
    monitor = monitor or Monitor(Detector(probe=elsewhere))
    changes = []
    for second in range(since, until):
        now = sim.start + second + 1
        if eyes is not None:
            monitor.saw([eye_looks.encode_looks(eyes(second))], now - 0.5)
        frames = [(t, raw) for t, raw in sim.stream(until=second + 1, since=second) if heard(decode(raw).rank, second)]
        if relays is None:
            for t, raw in frames:
                monitor.ingest(raw, t)
        else:
            for i, relay in enumerate(relays(second)):
                mine = [raw for _, raw in frames if decode(raw).rank // 2 == i]
                monitor.ingest_batch(Batch.of(mine, relay), now)
        changes += [(float(second + 1), c) for c in monitor.tick(now)]
    return monitor, changes


def both(second: int) -> list[Relay]:
    return [NODE_A, NODE_B]


def cut(second: int) -> list[Relay]:
    """Node B cut off at ``CUT``: its relay's batches no longer come."""
    return [NODE_A] if second >= CUT else [NODE_A, NODE_B]


def stale(host: str, pid: int) -> str:
    """What a node's eye last said of every process before it went silent: alive."""
    return "alive"


@pytest.mark.parametrize("probe", [elsewhere, stale], ids=["unseen", "its eye said alive before"])
def test_a_node_cut_off_is_one_critical_alert_naming_it_its_ranks_and_the_wait_within_10_s(
    probe: Callable[[str, int], str | None],
) -> None:
    """Node B (ranks 2-3, its relay) cut off at 20 s: ranks 2-3 stop short of their next
    all-reduce, and ranks 0-1 wait in it. One alert, node_lost, not a hang of ranks 2-3 besides;
    whatever node B's eye (its relay) said before, it is silent too."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).hang(2, at=CUT)
    monitor = Monitor(Detector(probe=probe))
    monitor, changes = run(sim, 60, lambda rank, second: rank < 2 or second < CUT, cut, monitor)
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_lost", CRITICAL, [2, 3])], raised
    t, alert = raised[0]
    assert t - CUT <= 10, t
    since = time_of_day(sim.start + CUT)
    assert alert.summary.startswith(f"node001 lost: its relay and ranks 2-3 unheard since {since}; "), alert.summary
    assert "ranks 0-1 wait for them in all_reduce #" in alert.summary
    assert "of group 0 (default_pg, ranks 0-3)" in alert.summary
    assert "Ping node001" in alert.detail and "code path" not in alert.detail
    ending = monitor.state.ending(monitor.alerts.active.values())
    assert ending is not None and ending.words.startswith("failed: node_lost: node001 lost: "), ending


def test_a_link_the_nodes_relay_said_went_down_is_quoted_once_it_is_told() -> None:
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).hang(2, at=CUT)
    monitor, _ = run(sim, 30, lambda rank, second: rank < 2 or second < CUT, cut)
    assert "eth0" not in monitor.alerts.active["node_lost:node001"].detail
    told = monitor.state.told
    for k in range(41):  # the first reading is the usual; the carrier lost 40 times since, long ago
        told.read_links("node001", [Link("eth0", NET, "up", True, k)], sim.start - 100 + k)
    told.read_links("node001", [Link("eth0", NET, "down", False, 40)], sim.start + CUT)
    assert len(monitor.state.links["node001"].said) == 32
    run(sim, 31, lambda rank, second: rank < 2 or second < CUT, cut, monitor, since=30)
    detail = monitor.alerts.active["node_lost:node001"].detail
    assert f"Its links, as its relay told: eth0 went down (carrier lost) at {time_of_day(sim.start + CUT)}.\n" in detail


def test_without_relays_the_ranks_of_one_host_falling_silent_together_are_the_node_lost() -> None:
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).hang(2, at=CUT)
    _, changes = run(sim, 60, lambda rank, second: rank < 2 or second < CUT)
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_lost", CRITICAL, [2, 3])], raised
    t, alert = raised[0]
    assert t - CUT <= 10, t
    assert alert.summary.startswith("node001 lost: ranks 2-3, all its ranks, unheard since "), alert.summary
    assert "ranks 0-1 wait for them in all_reduce #" in alert.summary


def test_a_dead_relay_whose_ranks_train_on_is_a_warning_naming_no_rank_resolved_when_it_is_back() -> None:
    """Node B's relay dies at 20 s, its ranks train on (ranks 0-1 keep completing all-reduces
    with them); a new relay takes them back at 40 s."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False)
    back = Relay("node001:2", "node001")

    def relays(second: int) -> list[Relay]:
        return [NODE_A, NODE_B] if second < CUT else [NODE_A] if second < 40 else [NODE_A, back]

    _, changes = run(sim, 60, lambda rank, second: True, relays)
    events = [(t, c.event, c.alert) for t, c in changes if c.event != "updated"]
    assert [(e, a.kind, a.severity, a.ranks) for _, e, a in events] == [
        ("raised", "node_unwatched", WARNING, []),
        ("resolved", "node_unwatched", WARNING, []),
    ], events
    (raised_at, _, alert), (resolved_at, _, _) = events
    assert raised_at - CUT <= 10 and 40 < resolved_at <= 42, (raised_at, resolved_at)
    since = time_of_day(sim.start + CUT)
    assert alert.summary.startswith(f"node001 unwatched: its relay is silent since {since}; its ranks 2-3 train on")
    assert "(ranks 0-1 complete collectives with them)" in alert.summary
    assert "restart `distmon relay` on node001 with the same --listen" in alert.detail


def test_one_silent_rank_of_a_two_rank_host_is_still_the_hang_of_that_rank() -> None:
    """Rank 2 holds the GIL (silent, its process alive); rank 3 on its host reports on: not a node."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).gil(2, at=CUT)
    _, changes = run(sim, 45, lambda rank, second: True)
    raised = [c.alert for _, c in changes if c.event == "raised"]
    assert [(a.kind, a.ranks) for a in raised] == [("hang", [2])], raised


def test_a_node_silent_as_a_whole_with_nobody_to_tell_is_lost_a_hang_threshold_after_its_silence() -> None:
    """A one-node job whose node is cut off: no other rank waits or steps to tell a dead node
    from a dead relay; once the silence has lasted a hang threshold (5 s) past the ranks'
    silence threshold (5 s), the node is lost, whatever the others do."""
    sim = SimJob(world=2, ranks_per_host=2, gpu=False)
    _, changes = run(sim, 45, lambda rank, second: second < CUT, lambda second: [NODE_A] if second < CUT else [])
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_lost", CRITICAL, [0, 1])], raised
    assert 10 <= raised[0][0] - CUT <= 11, raised
    assert "No other rank has stepped with them since" in raised[0][1].detail


def burning(second: int) -> list[Looks]:
    """What the eyes of node A and, while its relay lives, node B say: the ranks' processes
    burn CPU, as ranks that train do (a look that, taken before node B's relay died, would read
    as holding the GIL once they are silent)."""
    said = [Looks("node000")]
    if second < CUT:
        said.append(Looks("node001", [Sample(pid, 100.0 + second, "R", cpu=float(second)) for pid in (10002, 10003)]))
    return said


def test_a_dead_relay_whose_ranks_last_reports_came_a_batch_apart_is_the_warning_alone() -> None:
    """Node B's relay dies at 20 s; rank 3's last report came in the batch before rank 2's, so
    rank 3 is silent a second before the relay is, and node B's eye had seen both processes
    burn CPU. Nothing names a rank, nothing is critical, not for a tick: rank 3's silence is
    its relay's, and a look from before the eye was lost is no evidence."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False)
    monitor = Monitor(Detector())

    def heard(rank: int, second: int) -> bool:
        return not (rank == 3 and second == CUT - 1)

    _, changes = run(
        sim, 40, heard, lambda second: [NODE_A, NODE_B] if second < CUT else [NODE_A], monitor, eyes=burning
    )
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_unwatched", WARNING, [])], raised


def test_a_node_whose_ranks_trained_on_unwatched_to_the_end_is_not_lost_when_the_others_finish() -> None:
    """Node B's relay dies at 20 s; its ranks train on with ranks 0-1, which finish at 30 s
    (their last words come; node B's cannot). Node B stays unwatched, never lost, and the
    report's last word on ranks 2-3 is that they trained on unwatched."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False)
    monitor = Monitor(Detector())
    _, changes = run(sim, 30, lambda rank, second: True, lambda s: [NODE_A, NODE_B] if s < CUT else [NODE_A], monitor)
    for rank in (0, 1):
        report = sim.report(rank, sim.start + 30)
        assert report is not None
        monitor.ingest(encode(replace(report, exit=ExitInfo("finished", sim.start + 30))), sim.start + 30.2)
    _, after = run(sim, 50, lambda rank, second: False, lambda s: [NODE_A], monitor, since=30)
    raised = [c.alert for _, c in changes + after if c.event == "raised"]
    assert [(a.kind, a.severity) for a in raised] == [("node_unwatched", WARNING)], raised
    end = sim.start + 50
    known = fates(monitor.state, monitor.alerts.history, end)
    words = {r: rank_ending(s, end, known) for r, s in monitor.state.ranks.items()}
    since = time_of_day(monitor.state.ranks[2].received)
    assert words[2] == (
        f"trained on unwatched since {since}: the relay on node001 fell silent (see the node_unwatched alert)"
    ), words


def flaps(at: list[float], lasting: float) -> Callable[[int], list[Looks]]:
    """What node B's eye reads of eth0, on its clock (the sim's, less 1000): up, then down at
    each second of ``at`` for ``lasting`` seconds, read every half second."""

    def said(second: int) -> list[Looks]:
        readings = []
        for half in (0.0, 0.5):
            t = second + half
            down = sum(1 for a in at if a <= t)
            up = not any(a <= t < a + lasting for a in at)
            link = Link("eth0", NET, "up" if up else "down", up, down)
            readings.append(Looks("node001", links=[link], read=t - 1000.0))
        return [Looks("node000"), *readings]

    return said


def test_a_link_that_drops_and_comes_back_twice_is_one_warning_naming_the_node_and_the_link() -> None:
    """Node B's eth0 down 3 s at 20 s and at 30 s (read each half second); the job stands still
    each time (rank 2 pauses while it is down). One warning, naming node B and eth0, how often
    and how long, that the job stood still; none after the first drop alone."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).pause(2, at=20, every=10, seconds=3)
    monitor = Monitor(Detector())
    _, changes = run(sim, 40, lambda rank, second: True, both, monitor, eyes=flaps([20.0, 30.0], 3.0))
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("link_flapping", WARNING, [])], raised
    t, alert = raised[0]
    assert 33 <= t <= 35, "once it is back from the second drop"
    assert alert.summary == "node001: eth0 down 2 times in 13s, 3.0s each; the job stood still each time", alert
    assert f"{time_of_day(sim.start + 20)}: down 3.0s; the job stood still" in alert.detail, alert.detail
    assert "ip -s link show eth0" in alert.detail and "drain node001" in alert.detail


def test_a_single_short_drop_is_no_alarm_nor_drops_of_a_link_the_job_does_not_wait_on() -> None:
    sim = SimJob(world=4, ranks_per_host=2, gpu=False)
    _, changes = run(sim, 40, lambda rank, second: True, both, Monitor(Detector()), eyes=flaps([20.0], 1.0))
    assert not [c for _, c in changes if c.event == "raised"], "one drop is chance"
    _, changes = run(sim, 40, lambda rank, second: True, both, Monitor(Detector()), eyes=flaps([20.0, 30.0], 3.0))
    assert not [c for _, c in changes if c.event == "raised"], "the job went on: a link it does not use"

    def elsewhere(second: int) -> list[Looks]:
        return [replace(looks, host="head") for looks in flaps([20.0, 30.0], 3.0)(second)]

    sim = SimJob(world=4, ranks_per_host=2, gpu=False).pause(2, at=20, every=10, seconds=3)
    _, changes = run(sim, 40, lambda rank, second: True, both, Monitor(Detector()), eyes=elsewhere)
    assert not [c for _, c in changes if c.event == "raised"], "a node that runs no rank of the job"

    sim = SimJob(world=4, ranks_per_host=2, gpu=False, step_time=4.0)
    _, changes = run(sim, 40, lambda rank, second: True, both, Monitor(Detector()), eyes=flaps([20.0, 30.0], 3.0))
    assert not [c for _, c in changes if c.event == "raised"], "steps longer than a drop show no progress over it"


def test_an_infiniband_port_that_went_down_between_two_readings_is_counted_by_link_downed() -> None:
    sim = SimJob(world=4, ranks_per_host=2, gpu=False)

    def counted(second: int) -> list[Looks]:
        downed = 0 if second < 25 else 2  # two drops between two readings of its eye
        port = Link("mlx5_0 port 1", IB, "ACTIVE", None, downed, "LinkUp")
        return [Looks("node000"), Looks("node001", links=[port], read=second - 1000.0)]

    _, changes = run(sim, 30, lambda rank, second: True, both, Monitor(Detector()), eyes=counted)
    (alert,) = [c.alert for _, c in changes if c.event == "raised"]
    assert (
        alert.summary
        == "node001: mlx5_0 port 1 down 2 times in 0.0s, each shorter than the eye's 0.5s between readings"
    )
    assert "link_downed 0 -> 2" in alert.detail and "ibstat" in alert.detail, alert.detail


def test_no_straggler_is_named_from_the_ranks_still_heard_while_a_node_is_silent() -> None:
    """Rank 1 straggles from the start; node B's relay dies at 5 s, before anyone could tell,
    and a new one takes its ranks back at 40 s. Whom everyone waits for cannot be told from
    half the job: nobody is named while node B is silent, rank 1 once it is heard again."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).straggler(1)
    back = Relay("node001:2", "node001")

    def relays(second: int) -> list[Relay]:
        return [NODE_A, NODE_B] if second < 5 else [NODE_A] if second < 40 else [NODE_A, back]

    _, changes = run(sim, 70, lambda rank, second: True, relays, Monitor(Detector()))
    named = [(t, c.alert.ranks) for t, c in changes if c.event == "raised" and c.alert.kind == "straggler"]
    assert named and all(t > 40 for t, _ in named) and named[0][1] == [1], named


def test_a_real_flapping_link_is_its_one_warning_though_the_job_stood_still_past_the_hang_threshold() -> None:
    """A real recording (benchmarks/bench_nodes.py --faults flap): node-b's link down 3 s and up
    again three times 10 s apart; after the third, TCP's retransmissions kept every rank in one
    all-reduce 7 s, past the hang threshold. The link is the incident: one warning, no stuck
    collective paged besides."""
    monitor = Monitor()
    session = Session(ReplayFeed(str(DATA / "link-flapping.distmon"), speed=math.inf), monitor)
    session.drain()
    session.finish()
    raised = [(a.kind, a.severity, a.ranks) for a in monitor.alerts.history]
    assert raised == [("link_flapping", WARNING, [])], raised
    assert monitor.alerts.history[0].summary.endswith("3.2s each; the job stood still each time")


def test_a_node_whose_last_batches_came_late_before_it_was_cut_off_is_lost_not_unwatched() -> None:
    """Node B's relay forwards nothing in the two seconds before its link goes (a loaded host's
    relay, late), while ranks 2-3 still complete the others' all-reduces: ranks 0-1 step past
    what ranks 2-3 were last heard to issue, yet the node is up then. Silence allows a node's
    reports that late, so it may have been cut off that long after it was last heard: node_lost,
    never a node_unwatched naming none first (CI's stop 113, tests/jobs/test_nodes.py)."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).hang(2, at=CUT)
    late = CUT - 2
    _, changes = run(
        sim, 60, lambda rank, second: rank < 2 or second < CUT, lambda s: [NODE_A] if s >= late else [NODE_A, NODE_B]
    )
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_lost", CRITICAL, [2, 3])], raised


@pytest.mark.parametrize("before", [1, 3, 4])
def test_a_node_cut_off_in_a_collective_every_rank_issued_is_the_node_lost_not_the_transport(before: int) -> None:
    """Every rank issued the all-reduce ``before`` seconds before node B was cut off (it waited on
    node B's link), node B's ranks' last reports in it: a collective that does not complete while
    members are unheard is their node's incident, one node_lost, not a stuck collective with
    "none behind" raised first (a fresh-clone run of tests/jobs/test_nodes.py)."""
    sim = SimJob(world=4, ranks_per_host=2, gpu=False).stuck(at=CUT - before)
    _, changes = run(sim, 60, lambda rank, second: rank < 2 or second < CUT, cut)
    raised = [(t, c.alert) for t, c in changes if c.event == "raised"]
    assert [(a.kind, a.severity, a.ranks) for _, a in raised] == [("node_lost", CRITICAL, [2, 3])], raised
