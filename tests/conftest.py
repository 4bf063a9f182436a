"""Fixtures for every test: private ipc endpoints, and the event loop of the async tests; the
markers each folder's tests carry."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

MARKERS = {"jobs": "torchrun", "installed": "installed"}
"""The marker every test of a folder carries (``-m "not torchrun"`` runs the quick ones)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.parent.name
        if folder in MARKERS:
            item.add_marker(MARKERS[folder])


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
