"""The commands the tests run, as a user runs them, from this environment; free ports."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

DISTMON = [sys.executable, "-m", "distmon"]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
"""torchrun as installed beside this interpreter: the launcher a user types."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now, nor on the next one: a monitor's
    screens attach there (``distmon.endpoint.viewer_address``)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 65535 and _free(port + 1):
            return port


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
