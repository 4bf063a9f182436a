"""A Slurm job's nodes, as ``squeue`` says: the job named, or the one the user runs."""

from __future__ import annotations

import os
import shutil
import subprocess

from distmon.guards.text import visible
from distmon.node.jobhosts import hostlist

TIMEOUT = 15.0
"""Seconds ``squeue`` may take to answer."""


class SlurmError(Exception):
    """Why the job's nodes cannot be had, in one line."""


def job_nodes(job: str | None) -> tuple[str, list[str]]:
    """The job (``job``; else the allocation this runs in; else the user's one running job)
    and its nodes. Raises :class:`SlurmError`."""
    if shutil.which("squeue") is None:
        raise SlurmError("squeue is not here: run distmon where Slurm's commands are (a login node, a node of the job)")
    job = job or os.environ.get("SLURM_JOB_ID") or _the_running_job()
    if not job.replace("_", "").isdigit():
        raise SlurmError(f"{visible(job)} is not a Slurm job id")
    state, _, nodes = _squeue("-j", job, "-o", "%T|%N").partition("|")
    if not state:
        raise SlurmError(f"Slurm knows no job {job} (squeue -j {job} lists nothing)")
    if state.strip() != "RUNNING":
        raise SlurmError(f"Slurm job {job} is {visible(state.strip()).lower()}, not running")
    try:
        return job, hostlist(nodes.strip())
    except ValueError as e:
        raise SlurmError(f"Slurm job {job}'s nodes cannot be read: {e}") from None


def _the_running_job() -> str:
    jobs = [j for j in _squeue("--me", "-t", "RUNNING", "-o", "%i").split() if j]
    if len(jobs) == 1:
        return jobs[0]
    if not jobs:
        raise SlurmError("you run no Slurm job now (squeue --me -t RUNNING): give its id, --slurm JOBID")
    raise SlurmError(f"you run {len(jobs)} Slurm jobs ({', '.join(jobs[:8])}): give one, --slurm JOBID")


def _squeue(*args: str) -> str:
    try:
        done = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"squeue did not answer within {TIMEOUT:.0f}s") from None
    except OSError as e:
        raise SlurmError(f"cannot run squeue: {e.strerror}") from None
    if done.returncode != 0:
        said = next((line for line in done.stderr.splitlines() if line.strip()), f"exit code {done.returncode}")
        if "Invalid job id" in said:
            return ""
        raise SlurmError(f"squeue failed: {visible(said)}")
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() and "-j" in args else done.stdout
