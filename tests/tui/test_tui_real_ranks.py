"""The app watching a real torchrun job: three gloo ranks with distmon's hook, one of them
stuck before a collective; the watcher names it and shows its stack."""

from __future__ import annotations

import pytest

from distmon.monitor import overview
from distmon.monitor.detector import Detector
from distmon.monitor.feeds import LiveFeed
from distmon.monitor.monitor import Monitor
from distmon.monitor.probe import ProcessProbe
from distmon.tui.app import build_app
from distmon.tui.rank_detail import RankDetail
from distmon.tui.rank_table import RankTable

pytestmark = [pytest.mark.anyio, pytest.mark.torchrun]


async def test_watching_a_real_hang_names_the_stuck_rank(endpoint: str, torchrun) -> None:
    app = build_app(LiveFeed(endpoint), Monitor(Detector(probe=ProcessProbe())))
    async with app.run_test(size=(120, 36)) as pilot:
        # The stuck rank wakes after 30 s, so that no rank outlives the test for long even
        # if the launcher is killed before it could stop them.
        fault = ["--fault", "hang", "--fault-rank", "2", "--fault-step", "5", "--hang-seconds", "30"]
        fault += ["--steps", "30"]
        job = torchrun(3, *fault, endpoint=endpoint)
        with job:
            for _ in range(1200):  # at most two minutes
                if app.overview.culprits == {2}:
                    break
                await pilot.pause(0.1)
            assert app.overview.culprits == {2}, job.output
            assert app.overview.state == overview.HUNG
            assert app.overview.ranks == 3
            table = app.query_one(RankTable)
            table.action_jump([row.rank for row in table.rows].index(2))
            await pilot.press("enter")
            assert isinstance(app.screen, RankDetail)
            app.redraw()
            await pilot.pause()
            assert "train.py" in str(app.screen.query_one("#detail-stack").render())
