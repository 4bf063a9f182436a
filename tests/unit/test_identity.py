"""Who a rank is under each launcher, before ``init_process_group``: its launcher's variables,
torchrun's first (an srun task running torchrun inherits SLURM_PROCID), and the job's id."""

from __future__ import annotations

import pytest

from distmon.hooks import identity
from distmon.node import launchers

SRUN = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "4242"}
MPIRUN = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}
MPIEXEC = {"PMI_RANK": "2", "PMI_SIZE": "6", "MPI_LOCALRANKID": "0"}


@pytest.mark.parametrize(
    ("env", "rank", "world", "local"),
    [
        (SRUN, 5, 8, 1),
        (MPIRUN, 3, 4, 3),
        (MPIEXEC, 2, 6, 0),
        ({**SRUN, "RANK": "9", "WORLD_SIZE": "16", "LOCAL_RANK": "1"}, 9, 16, 1),  # srun ... torchrun
        ({}, 0, 1, 0),
    ],
)
def test_rank_world_and_local_rank_come_from_the_launcher(monkeypatch, env, rank, world, local) -> None:
    for name in launchers.RANK_VARIABLES + launchers.WORLD_VARIABLES + launchers.LOCAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert identity.Topology()() == (rank, world, None)
    assert identity.local_rank() == local


@pytest.mark.parametrize(
    ("env", "job"),
    [
        (SRUN, "slurm-4242"),
        (
            {**MPIRUN, "PMIX_NAMESPACE": "prterun-node1-1234@1", "MASTER_ADDR": "n1", "MASTER_PORT": "1"},
            "mpi-prterun-node1-1234@1",
        ),
        ({**MPIRUN, "OMPI_MCA_ess_base_jobid": "93847553"}, "mpi-93847553"),
        ({"TORCHELASTIC_RUN_ID": "abc", "SLURM_JOB_ID": "7"}, "slurm-7"),
        ({"MASTER_ADDR": "node1", "MASTER_PORT": "29500"}, "node1:29500"),
        ({"DISTMON_JOB_ID": "mine", "SLURM_JOB_ID": "7"}, "mine"),
    ],
)
def test_the_job_is_named_after_the_launchers_job(env, job) -> None:
    assert identity.job_id(env) == job


def test_a_variable_that_is_no_number_is_passed_over() -> None:
    assert launchers.first_number({"RANK": "", "SLURM_PROCID": "3"}, launchers.RANK_VARIABLES, 0) == 3
