"""Where things are in the checkout, for tests wherever they stand in ``tests/``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
"""Recordings, dumps and logs of real jobs."""
SCRIPTS = REPO / "tests" / "support" / "scripts"
"""The scripts tests run under torchrun besides the examples."""
EXAMPLES = REPO / "examples"
TRAIN = EXAMPLES / "train.py"
