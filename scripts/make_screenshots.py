"""Make the pictures in ``screenshots/`` from recordings of simulated jobs.

    .venv/bin/python scripts/make_screenshots.py

Each scenario is recorded through the real monitor and detector, then replayed through the
real app, headless, to its end; the screen is saved as SVG, and as PNG too where
``rsvg-convert`` or cairosvg is installed. The HTML report's pictures (``report-html*.png``:
the real job of ``tests/data/hang-rank2.distmon``, and a simulated 8192-rank one) are taken
with headless Chromium where it is installed, offline, with every path in the evidence made
relative to the repository: a picture carries nothing of the machine it was made on.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from distmon.export.html import render_page
from distmon.export.plain import render
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.tui.app import build_app
from distmon.tui.rank_table import RankTable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.simulate import SimJob, drive

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "screenshots"
SIZE = (120, 36)
REPO_PATH = re.compile(r"/\S*?/(?=(?:examples|tests|scripts|distmon)/)")
"""The machine's own part of a path into a checkout (``/work/main/``), up to the
repository's top-level folders."""
PAGE_SIZE = (1280, 2000)

# name: (job, seconds recorded, rank whose details to open or None, terminal size)
SCENES: dict[str, tuple[Callable[[], SimJob], float, int | None, tuple[int, int]]] = {
    "healthy": (lambda: SimJob(world=16), 40, None, SIZE),
    "hang": (lambda: SimJob(world=16).hang(5, at=20), 50, None, SIZE),
    "hang-detail": (lambda: SimJob(world=16).hang(5, at=20), 50, 5, SIZE),
    "worker-crash": (lambda: SimJob(world=16).worker_kill(3, at=20), 30, None, SIZE),
    "straggler": (lambda: SimJob(world=16, step_time=0.05).straggler(6, 1.15, 0.02, at=10), 60, None, SIZE),
    "straggler-detail": (lambda: SimJob(world=16, step_time=0.05).straggler(6, 1.15, 0.02, at=10), 60, 6, SIZE),
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


def relative(text: str) -> str:
    """``/work/main/examples/train.py`` as ``examples/train.py``."""
    return REPO_PATH.sub("", text)


def report_page(recording: Path, shown_as: str, png: Path, tmp: Path) -> bool:
    """The HTML report of ``recording`` (named ``shown_as`` on the page) as a PNG, by
    headless Chromium with no network; False where Chromium is not installed."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        return False
    pm = load_recording(str(recording))
    for alert in pm.alerts:
        alert.summary, alert.detail = relative(alert.summary), relative(alert.detail)
    page = tmp / f"{png.stem}.html"
    page.write_text(render_page(pm, str(recording), render(pm)), encoding="utf-8")
    command = [browser, "--headless", "--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars"]
    size = f"--window-size={PAGE_SIZE[0]},{PAGE_SIZE[1]}"
    subprocess.run([*command, f"--screenshot={png}", size, page.as_uri()], check=True, timeout=120, capture_output=True)
    print(f"{png.relative_to(ROOT)} (the report of {shown_as})")
    return True


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
        hang = ROOT / "tests" / "data" / "hang-rank2.distmon"
        if not report_page(hang, "tests/data/hang-rank2.distmon", OUT / "report-html.png", Path(tmp)):
            print("report-html*.png: not made, Chromium is not installed")
            return
        large = Path(tmp) / "8192-ranks.distmon"
        record(SimJob(world=8192).hang(4097, at=10), 25, large)
        report_page(large, "8192 simulated ranks, rank 4097 hung", OUT / "report-html-8192.png", Path(tmp))


if __name__ == "__main__":
    main()
