"""Stalls outside the training loop with real ranks under ``distmon run``: a rank late to
``init_process_group``, and every DataLoader worker blocked in ``__getitem__``. Each job is
killed mid-stall, as a person would, so each also shows how a job killed while hung ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distmon.monitor.postmortem import load

pytestmark = pytest.mark.torchrun

REPO = Path(__file__).resolve().parent.parent
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
JOB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "1"}
INJECTED = re.compile(r"\[train\] rank -?\d+: injecting \S+ at step \d+, t=([\d.]+)")


def run_until_stall(tmp_path: Path, *args: str, wait: float = 75) -> tuple[list[dict], str, float]:
    """The unmodified example under ``distmon run --record``, SIGTERM once the stall alert is
    up; the alerts (JSON), the text report, and when the fault was injected."""
    out, log = tmp_path / "run.distmon", tmp_path / "job.log"
    job = [TORCHRUN, "--standalone", "--nproc_per_node=4", str(REPO / "examples" / "train.py"), *args]
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "distmon", "run", "--record", str(out), "--", *job],
            env=JOB_ENV,
            stdout=output,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + wait
        while not any(" stall: " in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert any(" stall: " in line for line in lines), "".join(lines)[-3000:]
        time.sleep(2)  # the stacks taken from outside land in the alert's next update
        process.send_signal(signal.SIGTERM)  # forwarded to torchrun, which stops its ranks
        assert process.wait(60) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    reader.join(5)
    report = [sys.executable, "-m", "distmon", "report", str(out)]
    alerts = json.loads(subprocess.run([*report, "--json"], capture_output=True, text=True, check=True).stdout)
    text = subprocess.run(report, capture_output=True, text=True, check=True).stdout
    injected = INJECTED.search(log.read_text())
    assert injected, log.read_text()[-3000:]
    assert all(a.resolved is None for a in load(str(out)).alerts), "an alert resolved by the kill"
    return alerts, text, float(injected.group(1))


def test_a_rank_late_to_init_is_named_with_where_it_is(tmp_path: Path) -> None:
    alerts, text, injected_at = run_until_stall(
        tmp_path, "--fault", "late-init", "--fault-rank", "2", "--timeout", "120"
    )
    (stall,) = [a for a in alerts if a["kind"] == "stall"]
    assert stall["ranks"] == [2], stall
    assert stall["t"] - injected_at <= 60
    assert stall["summary"].startswith("ranks 0-1, 3 wait "), stall
    assert "in init_process_group" in stall["summary"]
    assert "rank 2 (" in stall["detail"] and "sleeping:" in stall["detail"]
    assert "time.sleep(args.hang_seconds)" in stall["detail"]
    assert "No alerts" not in text
    assert "Ended: stopped while hung: ranks 0-3 terminated by SIGTERM while the stall alert stood" in text


def test_blocked_dataloader_workers_are_named_with_their_own_frame(tmp_path: Path) -> None:
    alerts, text, _ = run_until_stall(
        tmp_path, "--fault", "loader-block", "--fault-rank", "-1", "--fault-step", "10", "--timeout", "120"
    )
    (stall,) = [a for a in alerts if a["kind"] == "stall"]
    assert stall["ranks"] == [0, 1, 2, 3], stall
    assert stall["summary"].startswith("all 4 ranks waiting for a DataLoader batch for "), stall
    detail = stall["detail"]
    assert re.search(r"waits for [\d.]+s for batch #10 from worker 0 \(pid \d+, alive\)", detail), detail
    assert "in Noise.__getitem__" in detail and "time.sleep(self.block[1])" in detail, detail
    assert "Ended: stopped while hung" in text
