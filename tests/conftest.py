"""Fixtures for every test: private ipc endpoints, and the event loop of the async tests; the
markers each folder's tests carry, and the order the files start in."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
MARKERS = {"jobs": "torchrun", "installed": "installed"}
"""The marker every test of a folder carries (``-m "not torchrun"`` runs the quick ones)."""


LONGEST = (
    "jobs/test_stopped_and_working_ranks_jobs.py",
    "jobs/test_found_jobs.py",
    "jobs/test_nodes.py",
    "installed/test_installed.py",
    "jobs/test_straggler_jobs.py",
    "jobs/test_hook_process.py",
    "jobs/test_found_launchers.py",
    "jobs/test_faults.py",
)
"""The files that take longest (75-150 s each of a test worker's time in a full run on a loaded
2-core machine: ``pytest --junitxml``'s times, summed by file), longest first. They start first,
the rest in the order collected: a long file that starts last ends the run alone, the other
workers idle (a run's last 30 s, before this order)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])
    items.sort(key=_longest_first)  # stable: each file's tests stay together, in their order


def _longest_first(item: pytest.Item) -> int:
    path = item.path.relative_to(TESTS).as_posix()
    return LONGEST.index(path) if path in LONGEST else len(LONGEST)


@pytest.fixture(scope="session")
def new_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], str]:
    """Makes fresh ipc endpoints, short enough for the 107-byte limit on socket paths."""
    directory = tmp_path_factory.mktemp("ipc")
    counter = itertools.count()
    return lambda: f"ipc://{directory}/{next(counter)}.sock"


@pytest.fixture
def endpoint(new_endpoint: Callable[[], str]) -> str:
    return new_endpoint()


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio; the async tests run through anyio's pytest plugin."""
    return "asyncio"
