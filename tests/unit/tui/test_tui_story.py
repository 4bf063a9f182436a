"""The screen tells one story (issue 33): on a real 4-rank job recorded hanging
(``tests/data/hang-rank2.distmon``: rank 2 asleep before collective #36), the header, the
culprit's row, a waiting row, the detail and the alert name the same rank, the same
collective number, in the same words."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from distmon.monitor import overview
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.state import statuses
from distmon.tui import job_header
from distmon.tui.app import DistmonApp, build_app
from distmon.tui.rank_detail import RankDetail
from distmon.tui.rank_table import RankTable, Row
from tests.support.paths import DATA

pytestmark = pytest.mark.anyio
HANG = DATA / "hang-rank2.distmon"


async def into_the_hang(pilot: Pilot, seconds: int = 2) -> None:
    """Jump the paused replay to the hang alert being raised, then a few seconds on."""
    app = pilot.app
    assert isinstance(app, DistmonApp) and isinstance(app.feed, ReplayFeed)
    await pilot.press("space", "n")
    for _ in range(300):
        if app.feed.paused and not app.feed.jumping:
            break
        await pilot.pause(0.02)
    for _ in range(seconds):
        await pilot.press("full_stop")
    app.redraw()
    await pilot.pause()


def row_of(table: RankTable, rank: int) -> str:
    return table.render_line(1 + table.rows.index(Row(rank=rank))).text


async def test_the_header_the_culprit_and_a_waiting_row_tell_one_story() -> None:
    app = build_app(ReplayFeed(str(HANG), speed=1.0))
    async with app.run_test(size=(120, 30)) as pilot:
        await into_the_hang(pilot)
        assert app.overview.state == statuses.HUNG
        assert app.overview.culprits == {2}
        hang = next(a for a in app.monitor.alerts.active.values() if a.kind == "hang")
        assert hang.ranks == [2] and "collective #36 (all_reduce)" in hang.summary

        story = str(app.header.render()).splitlines()[1]
        assert "rank 2 asleep at train.py:118 inject" in story
        assert "3 ranks wait for it in all_reduce #36 on default_pg" in story
        assert "(rank 1)" not in story and "seq 36" not in story

        table = app.query_one(RankTable)
        culprit = row_of(table, 2)
        assert culprit.startswith("!asleep ")
        assert "at train.py:118 inject · #35" in culprit and "all_reduce" not in culprit
        waiting = row_of(table, 1)
        assert waiting.startswith(" waits for 2 ") and "all_reduce #36" in waiting
        assert "stalled" not in culprit + waiting

        table.set_query("waits")
        assert [r.rank for r in table.rows] == [0, 1, 3]
        table.set_query("asleep")
        assert [r.rank for r in table.rows] == [2]
        table.set_query("")

        table.action_jump(table.rows.index(Row(rank=2)))
        await pilot.press("enter")
        assert isinstance(app.screen, RankDetail)
        app.redraw()
        await pilot.pause()
        assert " asleep  culprit" in str(app.screen.heading.render())


def test_no_rank_is_named_before_an_alert_names_one() -> None:
    """While a collective is stuck and no alert has named a culprit yet, the header's second
    line says so, instead of naming the rank whose wait is oldest."""
    stuck = overview.OldestCollective(rank=1, group="default_pg", op="all_reduce", seq=66, age=28.0, remaining=272.0)
    o = overview.Overview(
        job="j", world=4, ranks=4, hosts=1, state=statuses.STALLED, steps=60, steps_per_second=0.0,
        since_progress=27.0, oldest=stuck, culprits=frozenset(),
    )  # fmt: skip
    line = job_header.story(o).plain
    assert "no rank named yet · all_reduce #66 on default_pg in flight for 28s" in line
    assert "rank 1" not in line


def test_the_header_styles_every_state_the_monitor_gives_the_job() -> None:
    assert set(job_header.STATE_STYLE) == set(statuses.JOB_STATES)
