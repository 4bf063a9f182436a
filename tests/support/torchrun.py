"""A real torchrun job for the tests, in a session of its own (:mod:`tests.support.processes`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start


class Torchrun:
    """``torchrun --standalone examples/train.py`` in its own session; killed if left running.

    Use as a context manager so a failing test never leaves ranks behind.
    """

    def __init__(self, nproc: int, args: list[str], env: dict[str, str], log: Path, script: Path = TRAIN) -> None:
        self._log = log
        self.output = ""
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        with log.open("w") as out:
            self.process = start(
                [*launcher, f"--nproc_per_node={nproc}", str(script), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def __enter__(self) -> Torchrun:
        return self

    def __exit__(self, *_: object) -> None:
        kill_tree(self.process)

    def wait(self, timeout: float) -> int:
        """The job's exit code; fails the test with the job's output if it runs too long."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.process)
            self._read_output()
            pytest.fail(f"torchrun still running after {timeout} s:\n{self.output[-4000:]}")
        self._read_output()
        return code

    def _read_output(self) -> None:
        self.output = self._log.read_text(errors="replace")
