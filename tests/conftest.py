"""Shared test helpers: private ipc endpoints, a listening monitor, and real torchrun jobs."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.listener import Listener
from tests.support.paths import TRAIN


class Torchrun:
    """``torchrun --standalone examples/train.py`` in its own session; killed if left running.

    Use as a context manager so a failing test never leaves ranks behind.
    """

    def __init__(self, nproc: int, args: list[str], env: dict[str, str], log: Path, script: Path = TRAIN) -> None:
        self._log = log
        self.output = ""
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [*launcher, f"--nproc_per_node={nproc}", str(script), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def __enter__(self) -> Torchrun:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self._kill()

    def _kill(self) -> None:
        """torchrun starts each rank in a session of its own: kill them by descent, then it."""
        for child in psutil.Process(self.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def wait(self, timeout: float) -> int:
        """The job's exit code; fails the test with the job's output if it runs too long."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            self._read_output()
            pytest.fail(f"torchrun still running after {timeout} s:\n{self.output[-4000:]}")
        self._read_output()
        return code

    def _read_output(self) -> None:
        self.output = self._log.read_text(errors="replace")


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
