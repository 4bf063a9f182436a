"""Ranks in many process groups and channels: every group and channel a rank reports is kept
(a Megatron-core rank has twenty groups and more), and a hang in the last of them is named
like one in the first; a job pays for its widest rank only."""

from __future__ import annotations

import numpy as np

from distmon import wire
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import JobState
from distmon.monitor.state.columns import SLOTS
from distmon.monitor.state.limits import LIMITS
from distmon.wire import P2P, GroupStatus, rank_runs
from tests.support.messages import report
from tests.support.simulate import Layout, SimJob, drive

T = 1000.0
WORLD = 4
GROUPS = 40
EVERYONE = list(range(WORLD))


def group(k: int, ranks: list[int], enqueued: int, completed: int, op: str | None = None) -> GroupStatus:
    return GroupStatus(
        id=str(k + 1), backend="gloo", size=len(ranks), ranks=rank_runs(ranks), timeout=1800.0,
        enqueued=enqueued, completed=completed, desc=f"g{k:02d}", op=op, since=T if op else None,
    )  # fmt: skip


def channel(gid: str, peer: int, direction: str, posted: int, blocked: bool = False) -> P2P:
    return P2P(
        group=gid, peer=peer, dir=direction, posted=posted, completed=posted - 1 if blocked else posted,
        pending=posted if blocked else None, since=T if blocked else None,
        blocked=posted if blocked else None, blocked_since=T if blocked else None,
    )  # fmt: skip


def test_a_rank_in_forty_groups_keeps_every_group() -> None:
    state = JobState(LIMITS)
    mine = [group(k, EVERYONE, 5, 5) for k in range(GROUPS)]
    assert state.apply(report(0, WORLD, t=T + 30, groups=mine), T + 30)
    c = state.cols
    assert int(c.groups[0]) == GROUPS and c.group_slots >= GROUPS
    assert c.g_id[0, :GROUPS].tolist() == [wire.name_hash(g.id) for g in mine]
    last = state.group(wire.name_hash(mine[-1].id))
    assert last is not None and last.desc == "g39"
    assert state.group_id(wire.name_hash(mine[-1].id)) == mine[-1].id


def test_every_channel_a_rank_reports_is_kept_and_the_last_is_seen_blocked() -> None:
    state = JobState(LIMITS)
    pp = group(0, EVERYONE, 0, 0)
    p2p = [channel(pp.id, peer, d, 3) for peer in (1, 2, 3) for d in ("send", "recv")] * 3
    p2p = [channel(str(100 + k), c.peer, c.dir, c.posted) for k, c in enumerate(p2p)]
    p2p.append(channel(pp.id, 3, "recv", 4, blocked=True))
    state.apply(report(0, WORLD, t=T + 30, groups=[pp], p2p=p2p), T + 30)
    c = state.cols
    assert int(c.channels[0]) == len(p2p) == 19 and c.channel_slots >= 19
    blocked = state.blocked(np.array([0]))
    assert blocked.shape[1] == c.channel_slots
    assert np.flatnonzero(blocked[0]).tolist() == [18]
    assert bool(c.in_p2p[0])


def test_a_hang_in_the_fortieth_group_names_its_culprit_and_that_group() -> None:
    """Four ranks in the same forty groups; ranks 0-2 wait in the all-reduce of the last one,
    rank 3 never issued it."""
    state = JobState(LIMITS)
    for rank in EVERYONE:
        done = [group(k, EVERYONE, 5, 5) for k in range(GROUPS - 1)]
        last = group(GROUPS - 1, EVERYONE, 4, 4) if rank == 3 else group(GROUPS - 1, EVERYONE, 5, 4, "all_reduce")
        state.apply(report(rank, WORLD, t=T + 30, groups=[*done, last]), T + 30)
    findings = Detector().evaluate(state, T + 30.5)
    hangs = [f for f in findings if f.kind == "hang"]
    assert [f.ranks for f in hangs] == [[3]], [f.summary for f in findings]
    assert "g39" in hangs[0].summary + hangs[0].detail, hangs[0].detail
    assert "all_reduce" in hangs[0].summary + hangs[0].detail


def test_a_stall_behind_thirty_two_more_groups_a_rank_names_the_one_root() -> None:
    """tp 4 x pp 2 x dp 8, each rank in 32 groups besides (36 in all, the tp, pp and dp groups
    last): the rank stalled is named alone, its waits read off the last slots."""
    sim = SimJob(world=64, layout=Layout(tp=4, pp=2, extra=32)).hang(13, at=20)
    monitor = Monitor(Detector())
    changes = [(t - sim.start, c) for t, c in drive(sim, monitor, until=32) if c.event == "raised"]
    assert [(c.alert.kind, c.alert.ranks) for _, c in changes] == [("hang", [13])]
    assert changes[0][0] - 20 <= 10
    assert monitor.state.cols.group_slots == 40 and int(monitor.state.cols.groups.max()) == 36
    assert "mesh_tp" in changes[0][1].alert.detail and "63 ranks wait for it" in changes[0][1].alert.summary


def test_a_job_pays_for_its_widest_rank_and_widening_keeps_what_was_there() -> None:
    state = JobState(LIMITS)
    few = [group(k, EVERYONE, 2, 2) for k in range(3)]
    state.apply(report(0, WORLD, t=T + 30, groups=few, p2p=[channel(few[0].id, 1, "send", 2)]), T + 30)
    c = state.cols
    assert (c.group_slots, c.channel_slots) == (SLOTS, SLOTS), "a small job keeps the smallest width"
    state.apply(report(1, WORLD, t=T + 30, groups=[group(k, EVERYONE, 7, 7) for k in range(GROUPS)]), T + 30)
    c = state.cols
    assert c.group_slots == GROUPS and c.g_id.shape == c.g_since.shape == (c.capacity, GROUPS)
    assert int(c.groups[0]) == 3 and c.g_id[0, :3].tolist() == [wire.name_hash(g.id) for g in few]
    assert c.g_enq[0, :3].tolist() == [2, 2, 2] and c.g_enq[1, GROUPS - 1] == 7
    assert int(c.channels[0]) == 1 and int(c.c_posted[0, 0]) == 2
    state.apply(report(WORLD - 1, WORLD, t=T + 30, groups=few), T + 30)
    assert state.cols.group_slots == GROUPS, "the width never shrinks back"


def test_a_rank_in_more_groups_than_a_report_carries_says_so_once(capsys) -> None:
    from distmon.hooks.agent import Agent

    agent = Agent("ipc:///nowhere", 1.0)
    agent._say_if_over(wire.MAX_ROWS, 3)
    assert capsys.readouterr().err == ""
    agent._say_if_over(300, 3)
    agent._say_if_over(301, 3)
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "300 process groups" in said[0] and f"first {wire.MAX_ROWS}" in said[0]
