"""Fixtures for every test: private ipc endpoints, and the event loop of the async tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest


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
