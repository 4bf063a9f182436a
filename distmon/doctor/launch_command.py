"""The launch command a job is about to run, as torchrun will read it, and its mistakes; and
the launchers that start one process per rank without torchrun (``srun``, ``mpirun``) or run
it themselves (``accelerate launch``, ``deepspeed``), and what each rank then needs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from distmon.doctor.results import Check, failed, passed, warned

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
PER_RANK = {
    "srun": "SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID",
    "mpirun": "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_RANK (Open MPI)",
    "mpiexec": "OMPI_COMM_WORLD_RANK or PMI_RANK, and their sizes (Open MPI, MPICH)",
}
"""Launchers that start one process per rank and set only their own variables, which distmon
reads for each rank's identity (:mod:`distmon.hooks.identity`)."""
WRAPPERS = ("accelerate", "deepspeed")
"""Launchers that set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``
in each rank they start, as torchrun does."""


@dataclass
class Launch:
    """What a command line asks of the machine. Options are as torchrun spells them (dashes)."""

    argv: list[str]
    torchrun: bool = False
    launcher: str | None = None
    """The outermost launcher in ``argv``: ``srun``, ``mpirun``, ``mpiexec``, ``accelerate``,
    ``deepspeed`` or ``torchrun``; None for a plain ``python train.py``."""
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


def parse_launch(argv: list[str]) -> Launch:
    """Find the torchrun in ``argv`` (also behind ``srun``, ``env`` or ``python -m``) and read
    it; else the script after ``python``, ``accelerate launch`` or ``deepspeed``."""
    names = [os.path.basename(arg) for arg in argv]
    launcher = next((n for n in names if n in (*PER_RANK, *WRAPPERS, "torchrun")), None)
    for i, arg in enumerate(argv):
        if names[i] == "torchrun":
            return _parse_torchrun(argv, i + 1, launcher)
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in LAUNCHER_MODULES:
            return _parse_torchrun(argv, i + 2, launcher or "torchrun")
    if launcher in WRAPPERS:
        script = next((a for a in argv[names.index(launcher) + 1 :] if a.endswith(".py")), None)
        return Launch(argv, launcher=launcher, script=script, script_index=argv.index(script) if script else -1)
    for i, name in enumerate(names):
        if PYTHON.match(name):
            script = next((a for a in argv[i + 1 :] if not a.startswith("-")), None)
            module = "-m" in argv[i + 1 :]
            return Launch(argv, launcher=launcher, script=None if module else script)
    return Launch(argv, launcher=launcher)


def _parse_torchrun(argv: list[str], start: int, launcher: str | None) -> Launch:
    launch = Launch(argv, torchrun=True, launcher=launcher)
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


def check_launch(launch: Launch, cwd: str, env: Mapping[str, str]) -> list[Check]:
    """The launch mistakes that fail every rank at once."""
    checks = [] if launch.launcher is None else [_check_launcher(launch, env)]
    if launch.torchrun and launch.nnodes > 1:
        checks.append(_check_eyes(launch, env))
    if launch.torchrun:
        return [*checks, _check_torchrun_script(launch, cwd)]
    if launch.script is not None:
        return [*checks, _check_script(launch.script, cwd)]
    return checks


def _check_launcher(launch: Launch, env: Mapping[str, str]) -> Check:
    """What each rank the launcher starts learns from it, and what the job must add."""
    name = launch.launcher
    if launch.torchrun and name != "torchrun":
        return passed("launcher", f"{name} starts torchrun, which starts the ranks and sets RANK and WORLD_SIZE")
    if name not in PER_RANK:
        return passed("launcher", f"{name} sets RANK, WORLD_SIZE and LOCAL_RANK in each rank it starts")
    said = f"{name} starts one process per rank and sets {PER_RANK[name]}: distmon reads each rank from them"
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not env.get(v)]
    if not missing:
        return passed("launcher", said)
    return warned(
        "launcher",
        f"{said}; init_process_group also needs {' and '.join(missing)}, which {name} does not set",
        'export MASTER_ADDR (the first node: $(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) '
        "under Slurm) and MASTER_PORT (29500), and pass init_process_group rank= and world_size= from "
        f"{PER_RANK[name].split(',')[0]} and its size",
    )


def _check_eyes(launch: Launch, env: Mapping[str, str]) -> Check:
    """Whether every node of a multi-node job has its eye: a relay on the node, which its
    ranks reach on a node-local socket (``ipc://``)."""
    endpoint = env.get("DISTMON_ENDPOINT", "")
    if endpoint.startswith("ipc://"):
        return passed("eyes", f"the ranks report to a relay on their node ({endpoint}): every node has its eye")
    return warned(
        "eyes",
        f"a job of up to {launch.nnodes} nodes whose ranks report straight to the monitor: the nodes but "
        "the monitor's own are judged from their ranks' reports only (no process seen from outside, no "
        "stack of a rank holding the GIL or stopped, a lost node not told from a dead relay)",
        "give every node a relay: `distmon run --relay tcp://MONITOR:PORT -- torchrun ...` on each node "
        "(docs/deployment.md#a-relay-per-node)",
    )


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
