"""A process's place in its job, read off what its launcher gave it: its environment and its
command line. The one reading of those, for the hook in a rank (who am I), ``distmon run``'s
start-up (is this process a rank) and a node's eye finding a job from outside (which of these
processes are ranks, of which job).

torchrun, ``accelerate launch``, the ``deepspeed`` launcher and Ray Train set ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``; processes started one per rank by ``srun`` or ``mpirun``
have only their launcher's own variables, read in the order below (an ``srun`` task running
torchrun inherits ``SLURM_PROCID``, but its ``RANK`` is torchrun's and comes first).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
LOCAL_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
"""torchrun's (and every launcher that sets them), Open MPI's, MPICH's (Hydra's) and Slurm's."""

LAUNCHERS = frozenset(
    {
        "torchrun",
        "torch.distributed.run",
        "torch.distributed.launch",
        "accelerate",
        "accelerate.commands.launch",
        "accelerate.commands.accelerate_cli",
        "deepspeed",
        "deepspeed.launcher.runner",
        "deepspeed.launcher.launch",
    }
)
"""Python launchers that start the ranks and are none: under ``srun`` they inherit a rank's
variables too (``srun torchrun ...``, ``srun accelerate launch ...``)."""


def first_number(env: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    """The first of ``names`` set to a whole number in ``env``, else ``default``."""
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return default


def local_rank(env: Mapping[str, str] = os.environ) -> int:
    return first_number(env, LOCAL_VARIABLES, 0)


def launched_rank(env: Mapping[str, str]) -> tuple[int, int] | None:
    """The rank and world size a launcher gave the process, None where it gave none (the
    world is 1 where it gave only a rank)."""
    rank = first_number(env, RANK_VARIABLES, -1)
    if rank < 0:
        return None
    return rank, first_number(env, WORLD_VARIABLES, 1)


def launcher_job(env: Mapping[str, str], ray_run: str | None = None) -> str | None:
    """The job's id from its launcher, the same on every rank with no configuration; None
    where no launcher says it. ``ray_run`` is the Ray Train run the process works for, which
    only the process itself can tell."""
    if env.get("DISTMON_JOB_ID"):
        return env["DISTMON_JOB_ID"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return env["TORCHELASTIC_RUN_ID"]
    if ray_run:
        return f"ray-{ray_run}"
    for name in ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"):
        if env.get(name):
            return f"mpi-{env[name]}"
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    return None


def entry_point(argv: Sequence[str]) -> str:
    """What an interpreter command line runs: the module after ``-m``, the script's file
    name, or ``""`` for ``-c`` and the interactive prompt."""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, "")
        if arg.startswith("-m"):
            return arg[2:]
        if arg.startswith("-c"):
            return ""
        if arg in ("-W", "-X"):
            next(args, None)
        elif not arg.startswith("-") or arg == "-":
            return os.path.basename(arg)
    return ""
