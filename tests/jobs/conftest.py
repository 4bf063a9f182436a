"""Fixtures for the real-rank tests: a listening monitor, and real torchrun jobs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.forked import Forker
from tests.support.listener import Listener
from tests.support.paths import TRAIN
from tests.support.torchrun import Torchrun


@pytest.fixture
def listener(endpoint: str) -> Iterator[Listener]:
    with Listener(endpoint) as listening:
        yield listening


@pytest.fixture(scope="session")
def torchrun(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Torchrun]]:
    """Starts ``examples/train.py`` (or ``script``) under torchrun's agent, reporting to ``endpoint``.

    ``interval`` is the hook's report interval; the collective timeout is kept short so a
    broken job fails the test instead of hanging it. The job has no DataLoader workers unless
    ``args`` asks for them (``--workers N``): each worker is a process of its own, and most
    tests are about the ranks. Its ranks are forked (:mod:`tests.support.forked`): torch's
    import, a CPU-second or two a rank, is paid once a test worker (by its :class:`Forker`, started
    for its first job, which forks its jobs one at a time). A rank must end by returning or
    raising, or exit non-zero: one that ends by ``os._exit(0)`` hands the fork-started agent no
    result, and the job never ends. The tests of what a job shows from outside (its command lines,
    its launcher) start ``torchrun`` as a user does.
    """
    forkers: list[Forker] = []

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
            args = ("--distmon", "--timeout", "60", *(() if "--workers" in args else ("--workers", "0")), *args)
        if not forkers:
            forkers.append(Forker())
        return Torchrun(forkers[0], nproc, list(args), env, log, script)

    yield start
    for forker in forkers:
        forker.close()
