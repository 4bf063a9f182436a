"""The commands the tests run, as a user runs them, from this environment; free ports."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

DISTMON = [sys.executable, "-m", "distmon"]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
"""torchrun as installed beside this interpreter: the launcher a user types."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
