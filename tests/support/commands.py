"""The commands the tests run, as a user runs them, from this environment; free ports."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

DISTMON = [sys.executable, "-m", "distmon"]
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
"""torchrun as installed beside this interpreter: the launcher a user types."""


def distmon(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``distmon ARGS`` run to its end as a user runs it, its output captured as text. Its input
    is empty, never the test runner's own: a command that reads ends rather than waits.
    ``env`` replaces this process's environment; ``check`` raises on a non-zero exit."""
    return subprocess.run(
        [*DISTMON, *map(str, args)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=check,
    )


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
