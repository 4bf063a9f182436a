"""Who this rank is, under whichever launcher started it: its rank, world size and local rank
before ``init_process_group`` (and after it, from the process group), and the job's id, the
same on every rank with no configuration.

torchrun, ``accelerate launch``, the ``deepspeed`` launcher and Ray Train set ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``; processes started one per rank by ``srun`` or ``mpirun``
have only their launcher's own variables, read here in the order below (an ``srun`` task
running torchrun inherits ``SLURM_PROCID``, but its ``RANK`` is torchrun's and comes first).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

import torch.distributed as dist

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
LOCAL_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
"""torchrun's (and every launcher that sets them), Open MPI's, MPICH's (Hydra's) and Slurm's."""


def first_number(env: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    """The first of ``names`` set to a whole number in ``env``, else ``default``."""
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return default


def local_rank(env: Mapping[str, str] = os.environ) -> int:
    return first_number(env, LOCAL_VARIABLES, 0)


class Topology:
    """Rank, world size and backend: from the process group while there is one, and as last
    seen once it is destroyed (an mp.spawn rank has no RANK variable to fall back on), else
    from the launcher's variables."""

    def __init__(self) -> None:
        self.seen: tuple[int, int, str | None] | None = None

    def __call__(self) -> tuple[int, int, str | None]:
        if dist.is_available() and dist.is_initialized():
            self.seen = (dist.get_rank(), dist.get_world_size(), str(dist.get_backend()))
        if self.seen is not None:
            return self.seen
        env = os.environ
        return first_number(env, RANK_VARIABLES, 0), first_number(env, WORLD_VARIABLES, 1), None


def job_id(env: Mapping[str, str] = os.environ) -> str:
    """The same for every rank of a job, with no configuration, under the usual launchers."""
    if env.get("DISTMON_JOB_ID"):
        return env["DISTMON_JOB_ID"]
    if env.get("SLURM_JOB_ID"):
        return f"slurm-{env['SLURM_JOB_ID']}"
    if env.get("TORCHELASTIC_RUN_ID", "none") != "none":
        return env["TORCHELASTIC_RUN_ID"]
    ray_run = _ray_run_name()
    if ray_run:
        return f"ray-{ray_run}"
    for name in ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"):
        if env.get(name):
            return f"mpi-{env[name]}"
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    return f"{socket.gethostname()}:{os.getpid()}"


def _ray_run_name() -> str | None:
    """The name of the Ray Train run this process is a worker of (``RunConfig(name=...)``, or
    the one Ray made up), where Ray Train is loaded and says it; never imports Ray."""
    if "ray.train" not in sys.modules:
        return None
    try:
        name = sys.modules["ray.train"].get_context().get_experiment_name()
    except Exception:
        return None
    return name if isinstance(name, str) and name else None
