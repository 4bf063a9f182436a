"""The terminal UI's fixtures: recordings of the simulated scenarios in
:mod:`tests.support.tui`, made once a session, and a pinned time zone."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tui import record


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Alert times print in the local zone: pin it, so that snapshots match anywhere."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture(scope="session")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The recording of a scenario in :data:`tests.support.tui.SCENARIOS`, made once per session."""
    directory = tmp_path_factory.mktemp("recordings")
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = record(name, directory / f"{name}.distmon")
        return made[name]

    return get
