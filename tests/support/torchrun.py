"""A real torchrun job for the tests: torchrun's agent and its ranks, forked from a process that
imported torch once (:mod:`tests.support.forked`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.forked import Forker
from tests.support.paths import TRAIN


class Torchrun:
    """``torchrun --standalone --nproc-per-node NPROC examples/train.py`` (or ``script``); killed
    if left running. Use as a context manager so a failing test never leaves ranks behind.
    ``process`` is the launcher: its pid, ``poll``, ``send_signal``.
    """

    def __init__(
        self, forker: Forker, nproc: int, args: list[str], env: dict[str, str], log: Path, script: Path = TRAIN
    ) -> None:
        self._log = log
        self.process = forker.start(nproc, script, args, env, log)

    @property
    def output(self) -> str:
        """What the job has printed so far (its log, read again at each call)."""
        return self._log.read_text(errors="replace")

    def __enter__(self) -> Torchrun:
        return self

    def __exit__(self, *_: object) -> None:
        self.process.kill()

    def wait(self, timeout: float) -> int:
        """The job's exit code; fails the test with the job's output if it runs too long."""
        try:
            code = self.process.wait(timeout)
        except AssertionError as e:
            pytest.fail(str(e))
        return code
