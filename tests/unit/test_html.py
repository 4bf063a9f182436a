"""``distmon report FILE --html OUT`` on a real recording (tests/data: a 4-rank gloo job whose
rank 2 hung) and on a simulated job too large to draw every rank of."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from distmon.export.html import INSTALL_HTML, MAX_RANKS
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from tests.support.commands import distmon
from tests.support.paths import DATA
from tests.support.simulate import SimJob, drive


class Page(HTMLParser):
    """The page's tags: every address it would load, its headings, its plots."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.headings: list[str] = []
        self.scripts = 0
        self._heading = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.loads += [value or "" for name, value in attrs if name in ("src", "href", "data")]
        self.scripts += tag == "script"
        self._heading = tag == "h2"

    def handle_data(self, data: str) -> None:
        if self._heading:
            self.headings.append(data)
            self._heading = False


def report_html(recording: Path, out: Path) -> tuple[str, Page]:
    done = distmon("report", recording, "--html", out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    return text, Page(text)


def test_the_page_of_a_real_hang_is_self_contained_and_has_every_plot(tmp_path: Path) -> None:
    text, page = report_html(DATA / "hang-rank2.distmon", tmp_path / "hang.html")
    assert page.loads == [], "nothing is loaded from anywhere: no src, no href"
    assert "Plotly.newPlot" in text and "plotly.js" in text, "plotly's JavaScript is inlined"
    assert page.headings[0].startswith("First cause (+8.1s): hang, rank 2")
    assert page.headings[1:] == [
        "Step progress per rank",
        "Sequence numbers: default_pg",
        "Memory per rank",
        "Alert timeline",
    ]
    assert text.count('class="plotly-graph-div"') == 4
    assert "time.sleep(args.hang_seconds)" in text, "the culprit's stack is the evidence"
    assert "All 4 ranks are drawn" in text


def test_a_large_job_draws_a_sample_with_the_culprit_and_says_so(tmp_path: Path) -> None:
    recording = tmp_path / "big.distmon"
    sim = SimJob(world=256, gpu=True).hang(201, at=5)
    monitor = Monitor(Detector(probe=sim.probe), recorder=RecordingWriter(str(recording)))
    drive(sim, monitor, until=12)
    monitor.close()
    text, _ = report_html(recording, tmp_path / "big.html")
    assert f"Drawn: {MAX_RANKS} of 256 ranks (1 named by alerts" in text
    assert '"name":"rank 201 (named)"' in text
    assert "GPU memory (GiB)" in text


def test_an_unwritable_page_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = distmon("report", DATA / "hang-rank2.distmon", "--html", tmp_path / "no" / "x.html")
    assert done.returncode == 2
    assert "cannot write" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_without_plotly_html_is_one_line_and_exit_2(tmp_path: Path) -> None:
    without_plotly = "import sys; sys.modules['plotly'] = None; from distmon.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", without_plotly, "report", str(DATA / "hang-rank2.distmon"), "--html", "x.html"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"distmon report: --html needs the html extra (plotly): {INSTALL_HTML}"
