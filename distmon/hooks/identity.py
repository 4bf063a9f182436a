"""Who this rank is, under whichever launcher started it: its rank, world size and local rank
before ``init_process_group`` (and after it, from the process group), and the job's id, the
same on every rank with no configuration. The launchers' variables are read by
:mod:`distmon.node.launchers`, for a node's eye finding ranks from outside as for the hook."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

import torch.distributed as dist

from distmon.node.launchers import RANK_VARIABLES, WORLD_VARIABLES, first_number, launcher_job, local_rank

__all__ = ["Topology", "job_id", "local_rank"]


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
    """The same for every rank of a job, with no configuration, under the usual launchers;
    this process's own name where no launcher says it."""
    return launcher_job(env, _ray_run_name()) or f"{socket.gethostname()}:{os.getpid()}"


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
