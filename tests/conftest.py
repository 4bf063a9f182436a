"""Shared test helpers: private ipc endpoints, a listening monitor, and real torchrun jobs."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.listener import Listener
from tests.support.paths import TRAIN
from tests.support.torchrun import Torchrun


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
def listener(endpoint: str) -> Iterator[Listener]:
    with Listener(endpoint) as listening:
        yield listening


@pytest.fixture(scope="session")
def torchrun(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Torchrun]:
    """Starts ``examples/train.py`` (or ``script``) under torchrun, reporting to ``endpoint``.

    ``interval`` is the hook's report interval; the collective timeout is kept short so a
    broken job fails the test instead of hanging it.
    """

    def start(nproc: int, *args: str, endpoint: str, interval: float = 0.5, script: Path = TRAIN) -> Torchrun:
        env = {
            **os.environ,
            "DISTMON_ENDPOINT": endpoint,
            "DISTMON_INTERVAL": str(interval),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        log = tmp_path_factory.mktemp("torchrun") / "output.log"
        if script == TRAIN:
            args = ("--distmon", "--timeout", "60", *args)
        return Torchrun(nproc, list(args), env, log, script)

    return start
