"""Fresh virtual environments, on the Python that runs the tests or another, for tests of the
package as a user installs it (``tests/installed``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


class Venv:
    """A fresh virtual environment of ``python`` (this one by default); commands run in
    ``cwd``, away from the checkout. Without ``pip`` the environment has none of its own (its
    bootstrap costs seconds of CPU): this interpreter's pip installs into it, running on
    ``python``, so that it resolves what that Python needs."""

    def __init__(self, path: Path, cwd: Path, python: str = sys.executable, pip: bool = True) -> None:
        subprocess.run([python, "-m", "venv", *([] if pip else ["--without-pip"]), str(path)], check=True)
        self.bin = path / "bin"
        self.cwd = cwd
        self.pip = pip
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"

    def install(self, *requirements: str) -> None:
        """pip install from the same sources and cache a user's pip uses, torch held to its pin."""
        python = str(self.bin / "python")
        pip = [python, "-m", "pip"] if self.pip else [sys.executable, "-m", "pip", "--python", python]
        command = [*pip, "install", "--quiet", "--no-compile", "--constraint", str(REPO / "constraints.txt")]
        result = self.run(*command, *requirements, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(command), capture_output=True, text=True, env=self.env, cwd=self.cwd, timeout=timeout
        )

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.bin / "python"), "-c", code)
