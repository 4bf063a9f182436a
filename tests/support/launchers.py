"""``srun`` and ``mpirun`` as a job on one node sees them, for machines without Slurm or MPI:
each starts one process per rank, with the variables its launcher sets, and no ``RANK``.

:func:`install` writes them as executables into a directory to put first on ``PATH``, so that
``distmon run -- srun -n 3 python train.py`` runs as it would in a Slurm allocation: the
ranks are the launcher's children only here (slurmstepd starts them on a cluster), which
distmon does not rely on. Each test gives its jobs a number of its own: two jobs of one number
on one host (tests run side by side) would be one job claiming each rank twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

SHIM = '''#!{python}
"""{name} -n N COMMAND...: N processes of COMMAND, each with {name}'s variables."""
import os
import signal
import subprocess
import sys

NAME = {name!r}


def variables(rank: int, size: int) -> dict[str, str]:
    if NAME == "srun":
        return {{"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(size), "SLURM_NPROCS": str(size),
                "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_JOB_ID": "{job}", "SLURM_STEP_ID": "0"}}
    return {{"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(size),
            "PMIX_RANK": str(rank), "PMIX_NAMESPACE": "prterun-vm-{job}@1"}}


args = sys.argv[1:]
size = 1
while args and args[0].startswith("-"):
    option = args.pop(0)
    if option in ("-n", "-np", "--ntasks"):
        size = int(args.pop(0))
    elif option.startswith("--ntasks="):
        size = int(option.partition("=")[2])
ranks = [subprocess.Popen(args, env={{**os.environ, **variables(rank, size)}}) for rank in range(size)]


def forward(signum, _frame):
    for rank in ranks:
        if rank.poll() is None:
            rank.send_signal(signum)


signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
codes = [rank.wait() for rank in ranks]
sys.exit(next((c if c > 0 else 128 - c for c in codes if c), 0))
'''


def install(directory: Path, job: int) -> Path:
    """``srun`` and ``mpirun`` in ``directory``, their jobs numbered ``job``; returns it, to put
    first on ``PATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("srun", "mpirun"):
        path = directory / name
        path.write_text(SHIM.format(python=sys.executable, name=name, job=job))
        path.chmod(0o755)
    return directory
