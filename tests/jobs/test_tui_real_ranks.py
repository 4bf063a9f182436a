"""The app watching a real torchrun job: three gloo ranks with distmon's hook, one of them
stuck before a collective; the watcher names it and shows its stack. The job is started the
way the app's empty screen tells a user to start one."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from distmon.monitor.intake.feeds import LiveFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.state import statuses
from distmon.node.eye import NodeEye
from distmon.tui.app import build_app
from distmon.tui.rank_detail import RankDetail
from distmon.tui.rank_table import RankTable
from tests.support.paths import TRAIN
from tests.support.processes import session

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def shell(command: str) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` as a user types it, with this environment's ``distmon`` and ``torchrun``
    on the path; the job and everything it started are killed on the way out."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    with session(["bash", "-c", command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:
        yield process


def typed_from(hint: str, nproc: int, script: str) -> str:
    """The command the empty screen shows, with the user's numbers and script filled in."""
    command = re.search(r"(DISTMON_ENDPOINT=\S+ distmon run -- torchrun --nproc-per-node=N train\.py)", hint)
    assert command, hint
    return command.group(1).replace("=N ", f"={nproc} ").replace("train.py", script)


async def test_watching_a_real_hang_names_the_stuck_rank(endpoint: str) -> None:
    app = build_app(LiveFeed(endpoint, eye=NodeEye()), Monitor())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        # The stuck rank wakes after 30 s, so that no rank outlives the test for long even
        # if the launcher is killed before it could stop them.
        fault = "--fault hang --fault-rank 2 --fault-step 5 --hang-seconds 30 --steps 30 --timeout 60 --workers 0"
        command = typed_from(app.query_one(RankTable).empty_message, 3, f"{shlex.quote(str(TRAIN))} {fault}")
        with shell(command):
            for _ in range(1200):  # at most two minutes
                if app.overview.culprits == {2}:
                    break
                await pilot.pause(0.1)
            assert app.overview.culprits == {2}, command
            assert app.overview.state == statuses.HUNG
            assert app.overview.ranks == 3
            table = app.query_one(RankTable)
            table.action_jump([row.rank for row in table.rows].index(2))
            await pilot.press("enter")
            assert isinstance(app.screen, RankDetail)
            # Named from outside, the rank may not have sent its stack yet: it comes with a report.
            stack = app.screen.query_one("#detail-stack")
            for _ in range(100):  # at most ten seconds
                app.redraw()
                await pilot.pause(0.1)
                if "train.py" in str(stack.render()):
                    break
            assert "train.py" in str(stack.render())
