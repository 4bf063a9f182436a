"""The simulator, which lives with the tests' support code (``tests/support/simulate.py``)
and is not shipped in the package, made importable by the benchmarks."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.simulate import GiB, Layout, SimJob, drive

__all__ = ["GiB", "Layout", "SimJob", "drive"]
