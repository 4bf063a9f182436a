"""Make the pictures in ``screenshots/`` from recordings of simulated jobs.

    .venv/bin/python scripts/make_screenshots.py

Each scenario is recorded through the real monitor and detector, then replayed through the
real app, headless, to its end; the screen is saved as SVG, and as PNG too where
``rsvg-convert`` or cairosvg is installed.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from distmon.monitor.detector import Detector
from distmon.monitor.feeds import ReplayFeed
from distmon.monitor.monitor import Monitor
from distmon.monitor.recording import RecordingWriter
from distmon.tui.app import build_app
from distmon.tui.rank_table import RankTable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.simulate import SimJob, drive

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (120, 36)

# name: (job, seconds recorded, rank whose details to open or None, terminal size)
SCENES: dict[str, tuple[Callable[[], SimJob], float, int | None, tuple[int, int]]] = {
    "healthy": (lambda: SimJob(world=16), 40, None, SIZE),
    "hang": (lambda: SimJob(world=16).hang(5, at=20), 50, None, SIZE),
    "hang-detail": (lambda: SimJob(world=16).hang(5, at=20), 50, 5, SIZE),
    "worker-crash": (lambda: SimJob(world=16).worker_kill(3, at=20), 30, None, SIZE),
    "4096-ranks": (lambda: SimJob(world=4096).hang(2049, at=10), 25, None, SIZE),
    "small-terminal": (lambda: SimJob(world=16).hang(5, at=20), 50, None, (80, 24)),
}


def record(sim: SimJob, until: float, path: Path) -> None:
    monitor = Monitor(Detector(probe=sim.probe), recorder=RecordingWriter(str(path)))
    drive(sim, monitor, until)
    monitor.close()


async def shoot(recording: Path, rank: int | None, size: tuple[int, int], svg: Path) -> None:
    feed = ReplayFeed(str(recording), speed=math.inf)
    app = build_app(feed)
    async with app.run_test(size=size) as pilot:
        while not feed.finished or app.session.taken:
            await pilot.pause(0.05)
        app.redraw()
        await pilot.pause()
        if rank is not None:
            table = app.query_one(RankTable)
            table.action_jump([row.rank for row in table.rows].index(rank))
            await pilot.press("enter")
            app.redraw()
            await pilot.pause()
        svg.write_text(app.export_screenshot(title=f"distmon replay {recording.name}"))


def to_png(svg: Path) -> Path | None:
    png = svg.with_suffix(".png")
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True, timeout=60)
        return png
    try:
        import cairosvg
    except ImportError:
        return None
    cairosvg.svg2png(url=str(svg), write_to=str(png))
    return png


def main() -> None:
    os.environ["TZ"] = "UTC"  # alert times, so that the pictures are the same anywhere
    time.tzset()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, until, rank, size) in SCENES.items():
            recording = Path(tmp) / f"{name}.distmon"
            record(make(), until, recording)
            svg = OUT / f"{name}.svg"
            asyncio.run(shoot(recording, rank, size, svg))
            png = to_png(svg)
            print(f"{svg.relative_to(OUT.parent)}" + (f", {png.name}" if png else ""))


if __name__ == "__main__":
    main()
