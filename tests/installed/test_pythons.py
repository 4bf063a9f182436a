"""Every Python the package claims (``requires-python``), from the lowest to the newest this
machine has: the wheel installs in a fresh environment with no extra, its monitor side's
commands run as the README types them, and every reader judges as on the Python the tests run
on (``distmon analyze`` of every sixth log and every dump set in ``tests/data``, ``report`` and ``replay
--headless`` of every recording, compared with this Python's). The rank side is tested on this
Python alone (test_installed.py: torch 2.13's CPU wheel is there for no other; on the others
``pip install torch==2.13.0`` pulls the CUDA build), and is claimed for it alone.

The Pythons are pyenv's (``~/.pyenv/versions/3.N.P``) or ``python3.N`` on the PATH, the newest
patch of each; they install side by side, in environments without a pip of their own (this
one's installs into each, run on that Python).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

from tests.support.paths import DATA, REPO
from tests.support.venvs import Venv

pytestmark = pytest.mark.timeout(600)
"""The first test waits for three Pythons' environments, made side by side, and every reader run on
each: about two minutes on a quiet 2-core machine, over five with six test files beside it."""

LOWEST = (3, 10)
"""The lowest Python the package claims: ``requires-python``, and what mypy and ruff check for."""
EVERY_READER = """
import contextlib, io, json, sys
from pathlib import Path
from distmon.cli import main
data = Path(sys.argv[1])
runs = [["analyze", str(p), "--json"] for p in sorted((data / "logs").rglob("*.log"))[::6]]
runs += [["analyze", str(p), "--json"] for p in sorted((data / "nccl-dumps").iterdir()) if p.is_dir()]
for p in sorted(data.glob("*.distmon")):
    runs += [["report", "--json", str(p)], ["replay", "--headless", "--json", str(p)]]
said = {}
for argv in runs:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    said[" ".join(argv).replace(str(data), "DATA")] = [code, json.loads(out.getvalue())]
json.dump(said, sys.stdout, sort_keys=True)
"""
"""Every reader of files from elsewhere, on the files of ``tests/data`` (every sixth of its logs),
what each says, as JSON."""
COMMANDS = {
    "report": ("report", str(DATA / "hang-rank2.distmon")),
    "replay": ("replay", "--headless", str(DATA / "hang-rank2.distmon")),
    "analyze": ("analyze", str(DATA / "nccl-dumps" / "lock_gil_2nd")),
}
"""The README's commands, as a user types them, whose output must not depend on the Python."""


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CLAIMED = [
    c.rpartition(" :: ")[2]
    for c in PROJECT["project"]["classifiers"]
    if c.startswith("Programming Language :: Python :: 3.")
]
"""The Pythons the package says it is tested on (its classifiers)."""


def pythons() -> dict[str, str]:
    """Each Python from :data:`LOWEST` on that this machine has, by ``3.N``, but this one."""
    found: dict[tuple[int, ...], str] = {}
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for path in sorted(root.glob("3.*/bin/python")):
        if re.fullmatch(r"3\.\d+\.\d+", path.parts[-3]):
            found[tuple(int(n) for n in path.parts[-3].split("."))] = str(path)
    newest = {version[:2]: path for version, path in sorted(found.items())}
    for minor in range(LOWEST[1], 30):
        if (3, minor) not in newest and (path := shutil.which(f"python3.{minor}")) and runs(path, minor):
            newest[(3, minor)] = path
    return {
        f"{a}.{b}": path
        for (a, b), path in sorted(newest.items())
        if (a, b) >= LOWEST and (a, b) != sys.version_info[:2]
    }


def runs(python: str, minor: int) -> bool:
    """Whether ``python`` is Python 3.``minor`` (a pyenv shim may stand for none)."""
    said = subprocess.run([python, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True)
    return said.returncode == 0 and said.stdout.strip() == str(minor)


PYTHONS = pythons()
HERE = "{}.{}".format(*sys.version_info[:2])
VERSIONS = sorted({*CLAIMED, *PYTHONS} - {HERE}, key=lambda v: tuple(map(int, v.split("."))))
"""Every Python claimed, and any newer this machine has, but this one."""


@dataclass
class Said:
    """What the monitor side's commands said on one Python."""

    commands: dict[str, subprocess.CompletedProcess[str]]
    readers: subprocess.CompletedProcess[str]


def install(python: str | None, root: Path, wheel: Path) -> Said | None:
    """The wheel installed for ``python`` in a fresh environment, and what its commands say;
    None where this machine lacks that Python."""
    if python is None:
        return None
    venv = Venv(root / "venv", root, python=python, pip=False)
    venv.install(str(wheel))
    commands = {name: venv.run("distmon", *argv) for name, argv in COMMANDS.items()}
    commands["look"] = venv.run("distmon", "look", "--help")
    return Said(commands, venv.run(str(venv.bin / "python"), "-c", EVERY_READER, str(DATA), timeout=300))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> dict[str, Said | None]:
    """Every Python's, made side by side."""
    with ThreadPoolExecutor(max_workers=len(VERSIONS)) as pool:
        made = {v: pool.submit(install, PYTHONS.get(v), tmp_path_factory.mktemp(f"python{v}"), wheel) for v in VERSIONS}
        return {version: future.result() for version, future in made.items()}


def on(installed: dict[str, Said | None], version: str) -> Said:
    said = installed[version]
    if said is None:
        pytest.skip(f"Python {version} is not on this machine (pyenv's, or python{version} on the PATH)")
    return said


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Said:
    """What the same commands say on this Python (the checkout's distmon)."""
    cwd = tmp_path_factory.mktemp("here")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=cwd, timeout=300)

    return Said(
        {name: run("-m", "distmon", *argv) for name, argv in COMMANDS.items()}, run("-c", EVERY_READER, str(DATA))
    )


def test_the_lowest_python_claimed_is_the_one_the_tools_check_for() -> None:
    project = PROJECT
    lowest = ".".join(map(str, LOWEST))
    assert project["project"]["requires-python"] == f">={lowest}"
    assert project["tool"]["mypy"]["python_version"] == lowest
    assert project["tool"]["ruff"]["target-version"] == "py" + lowest.replace(".", "")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_monitor_side_installs_and_runs_the_readmes_commands(
    installed: dict[str, Said | None], here: Said, version: str
) -> None:
    said = on(installed, version).commands
    for name, result in said.items():
        assert "Traceback" not in result.stderr, f"{version}: distmon {name}: {result.stderr[-3000:]}"
    assert said["look"].returncode == 0 and said["look"].stdout.startswith("usage: distmon look")
    for name in COMMANDS:
        assert (said[name].returncode, said[name].stdout) == (
            here.commands[name].returncode,
            here.commands[name].stdout,
        )
    assert "rank 2" in said["report"].stdout and "CULPRIT ranks 10, 15" in said["analyze"].stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_every_reader_judges_every_file_as_on_this_python(
    installed: dict[str, Said | None], here: Said, version: str
) -> None:
    got = on(installed, version).readers
    assert got.returncode == 0, got.stderr[-3000:]
    assert here.readers.returncode == 0, here.readers.stderr[-3000:]
    ours, theirs = json.loads(here.readers.stdout), json.loads(got.stdout)
    assert len(ours) > 60
    assert [run for run in ours if ours[run] != theirs.get(run)] == []
