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

import contextlib
import json
import os
import re
from collections.abc import Mapping, Sequence

from distmon.node.jobhosts import hostlist

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
        "distmon",
    }
)
"""Python launchers that start the ranks and are none: under ``srun`` they inherit a rank's
variables too (``srun torchrun ...``, ``srun accelerate launch ...``); and distmon itself (a
node's eye started as a step of a Slurm job has its variables)."""


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


RANK_OPTIONS = ("--rank", "--global-rank", "--global_rank", "--local_rank", "--local-rank")
WORLD_OPTIONS = ("--world-size", "--world_size")
"""Options a rank's command line gives its rank and world size in (torch's old launcher's
``--local_rank``, the usual spellings of a hand-written launcher's)."""


def argv_rank(argv: Sequence[str]) -> tuple[int, int | None] | None:
    """The rank and world size a command line gives its process (``--rank 3``,
    ``--world-size=8``), None where it gives no rank. Many a script takes a ``--rank`` meaning
    something else: the finder believes it only of a process of a torch job (its store named in
    its environment) with a world size the rank fits in."""
    found: dict[str, int] = {}
    for i, arg in enumerate(argv[1:], start=1):
        option, equals, value = arg.partition("=")
        if not equals:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        if value.isdigit() and option in RANK_OPTIONS + WORLD_OPTIONS:
            found.setdefault("world" if option in WORLD_OPTIONS else "rank", int(value))
    return (found["rank"], found.get("world")) if "rank" in found else None


def tree_rank(env: Mapping[str, str]) -> tuple[int, int, int] | None:
    """A local rank Lightning's DDP launcher started: its ``NODE_RANK``, ``WORLD_SIZE`` and
    ``LOCAL_RANK``, where it has those and no rank of its own (the tree places it)."""
    names = ("NODE_RANK", "WORLD_SIZE", "LOCAL_RANK")
    values = [env.get(name, "").strip() for name in names]
    if not all(v.isdigit() for v in values):
        return None
    node, world, local = (int(v) for v in values)
    return node, world, local


def store_of(env: Mapping[str, str]) -> tuple[str, int] | None:
    """Where the job's ranks meet (``MASTER_ADDR``, ``MASTER_PORT``), where the environment says."""
    address, port = env.get("MASTER_ADDR", "").strip(), env.get("MASTER_PORT", "").strip()
    return (address, int(port)) if address and port.isdigit() and 0 < int(port) < 65536 else None


def node_list(env: Mapping[str, str]) -> list[str]:
    """The job's hosts as Slurm lists them (``SLURM_JOB_NODELIST``), expanded; none where it
    lists none, or in a form Slurm does not write."""
    text = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        return hostlist(text)
    except ValueError:
        return []


RAY_TRAIN_WORKER = "ray::RayTrainWorker"
"""How Ray names a Ray Train worker's process (its command line, set by Ray)."""
RAY_TRAIN_THREAD = "ray/train/"
"""Where a Ray Train worker's training thread stands: not its main thread, Ray's event loop."""
_RAY_RANK = re.compile(r"\[rank=(\d+), world_size=(\d+)\]")
MAX_RAY_LOG = 1 << 20


def ray_train_rank(log: str) -> tuple[int, int, str | None] | None:
    """A Ray Train worker's rank, world size and run, from Ray's own log of it (Ray Train writes
    ``Setting up process group for: env:// [rank=2, world_size=4]`` there as it joins the job,
    with the run's name in the JSON lines of its log of the worker); None before it has."""
    for line in log.splitlines():
        found = _RAY_RANK.search(line)
        if found is None:
            continue
        run = None
        with contextlib.suppress(ValueError, AttributeError):
            named = json.loads(line).get("run_name")
            run = named if isinstance(named, str) else None
        return int(found.group(1)), int(found.group(2)), run
    return None


def slurm_job(job_id: str) -> str:
    """The job's id where Slurm launched it (its ``SLURM_JOB_ID``)."""
    return f"slurm-{job_id}"


def launcher_job(env: Mapping[str, str], ray_run: str | None = None) -> str | None:
    """The job's id from its launcher, the same on every rank with no configuration; None
    where no launcher says it. ``ray_run`` is the Ray Train run the process works for, which
    only the process itself can tell."""
    if env.get("DISTMON_JOB_ID"):
        return env["DISTMON_JOB_ID"]
    if env.get("SLURM_JOB_ID"):
        return slurm_job(env["SLURM_JOB_ID"])
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
