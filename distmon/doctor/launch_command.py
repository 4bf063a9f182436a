"""The launch command a job is about to run, as torchrun will read it, and its mistakes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, field

from distmon.doctor.results import Check, failed, passed

LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
FLAGS = frozenset(
    [
        "--standalone",
        "-m",
        "--module",
        "--no-python",
        "--no_python",
        "--run-path",
        "--run_path",
        "--virtual-local-rank",
        "--virtual_local_rank",
    ]
)
"""torchrun's options that take no value; every other option takes one."""
PYTHON = re.compile(r"python[0-9.]*$")


@dataclass
class Launch:
    """What a command line asks of the machine. Options are as torchrun spells them (dashes)."""

    argv: list[str]
    torchrun: bool = False
    options: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    script: str | None = None
    """torchrun's training script, or the script after ``python``."""
    script_index: int = -1
    """Where ``script`` is in ``argv``."""

    def option(self, name: str) -> str | None:
        return self.options.get(name)

    @property
    def nproc_per_node(self) -> str | None:
        return self.option("--nproc-per-node")

    @property
    def nnodes(self) -> int:
        """The most nodes the job may span (``--nnodes=2:4`` counts 4)."""
        value = self.option("--nnodes") or "1"
        try:
            return int(value.rpartition(":")[2])
        except ValueError:
            return 1


def parse(argv: list[str]) -> Launch:
    """Find the torchrun in ``argv`` (also behind ``srun``, ``env`` or ``python -m``) and read it."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "torchrun":
            return _parse_torchrun(argv, i + 1)
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in LAUNCHER_MODULES:
            return _parse_torchrun(argv, i + 2)
    for i, arg in enumerate(argv):
        if PYTHON.match(os.path.basename(arg)):
            script = next((a for a in argv[i + 1 :] if not a.startswith("-")), None)
            module = "-m" in argv[i + 1 :]
            return Launch(argv, script=None if module else script)
    return Launch(argv)


def _parse_torchrun(argv: list[str], start: int) -> Launch:
    launch = Launch(argv, torchrun=True)
    rest = iter(enumerate(argv[start:], start))
    for i, arg in rest:
        if not arg.startswith("-"):
            launch.script, launch.script_index = arg, i
            break
        name, has_value, value = arg.partition("=")
        name = name.replace("_", "-") if name.startswith("--") else name
        if name in FLAGS:
            launch.flags.add("--module" if name == "-m" else name)
        elif has_value:
            launch.options[name] = value
        else:
            launch.options[name] = next(rest, (0, ""))[1]
    return launch


def check_launch(launch: Launch, cwd: str) -> list[Check]:
    """The launch mistakes that fail every rank at once."""
    if launch.torchrun:
        return [_check_torchrun_script(launch, cwd)]
    if launch.script is not None:
        return [_check_script(launch.script, cwd)]
    return []


def _check_torchrun_script(launch: Launch, cwd: str) -> Check:
    script = launch.script
    if script is None:
        return failed(
            "launch", "torchrun is given no training script", "end the command with the script and its arguments"
        )
    if "--no-python" in launch.flags:
        if shutil.which(script) is None:
            return failed(
                "launch",
                f"{script} is not a program on PATH (torchrun --no-python runs it directly)",
                f"give the full path of {script}",
            )
        return passed("launch", f"torchrun --no-python runs {script}")
    if "--module" in launch.flags:
        return passed("launch", f"torchrun runs python -m {script}")
    if PYTHON.match(os.path.basename(script)):
        fixed = shlex.join(launch.argv[: launch.script_index] + launch.argv[launch.script_index + 1 :])
        return failed(
            "launch",
            f"torchrun ... {script} train.py: torchrun runs its script with Python itself, so every rank "
            f"tries to run a file named '{script}' and fails with \"can't open file\"",
            f"drop '{script}': {fixed}",
        )
    return _check_script(script, cwd)


def _check_script(script: str, cwd: str) -> Check:
    if os.path.isfile(os.path.join(cwd, script)):
        return passed("launch", f"the script {script} exists")
    return failed(
        "launch",
        f"the script {script} does not exist in {cwd}",
        "run from the directory the path is relative to, or give its full path",
    )
