"""``distmon watch`` and ``distmon replay`` as a user runs them: one line and exit code 2
for an endpoint that cannot be bound or a file that is not a recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmon.monitor.intake.feeds import LiveFeed
from tests.support.commands import distmon, free_port


def test_watch_on_a_busy_endpoint_says_so_in_one_line() -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    busy = LiveFeed(endpoint)
    try:
        result = distmon("watch", "--endpoint", endpoint)
    finally:
        busy.close()
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distmon watch: cannot listen on {endpoint}")
    assert "in use" in lines[0]


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "cannot open"), (b"", "is empty"), (b"\x00\x01 not msgpack", "not a distmon")],
)
def test_replay_of_a_bad_file_says_so_in_one_line(tmp_path: Path, content: bytes | None, says: str) -> None:
    path = tmp_path / "run.distmon"
    if content is not None:
        path.write_bytes(content)
    result = distmon("replay", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distmon replay: ") and says in lines[0]


def test_replay_rejects_a_bad_speed(tmp_path: Path) -> None:
    result = distmon("replay", str(tmp_path / "x"), "--speed", "fast")
    assert result.returncode == 2 and "not a speed" in result.stderr
