"""A real torchrun job for the tests: torchrun's agent and its ranks forked from a process that
imported torch once (:mod:`tests.support.forked`), or ``torchrun`` started as a user starts it,
in a session of its own (:mod:`tests.support.processes`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.forked import Forker, Job
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start


class Torchrun:
    """``torchrun --standalone --nproc-per-node NPROC examples/train.py`` (or ``script``); killed
    if left running. Use as a context manager so a failing test never leaves ranks behind.
    ``process`` is the launcher: its pid, ``poll``, ``send_signal``.
    """

    def __init__(
        self,
        forker: Forker | None,
        nproc: int,
        args: list[str],
        env: dict[str, str],
        log: Path,
        script: Path = TRAIN,
    ) -> None:
        """Forked by ``forker``; with None, started by exec (a rank that ends itself by
        ``os._exit(0)`` hands torch's fork-started agent no result, and so never ends)."""
        self._log = log
        self.output = ""
        self.process: Job | subprocess.Popen[bytes]
        if forker is not None:
            self.process = forker.start(nproc, script, args, env, log)
            return
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        with log.open("w") as out:
            self.process = start([*launcher, str(script), *args], env=env, stdout=out, stderr=subprocess.STDOUT)

    def __enter__(self) -> Torchrun:
        return self

    def __exit__(self, *_: object) -> None:
        self._kill()

    def _kill(self) -> None:
        if isinstance(self.process, Job):
            self.process.kill()
        else:
            kill_tree(self.process)

    def wait(self, timeout: float) -> int:
        """The job's exit code; fails the test with the job's output if it runs too long."""
        try:
            code = self.process.wait(timeout)
        except (AssertionError, subprocess.TimeoutExpired):
            self._kill()
            self.output = self._log.read_text(errors="replace")
            pytest.fail(f"torchrun still running after {timeout} s:\n{self.output[-4000:]}")
        self.output = self._log.read_text(errors="replace")
        return code
