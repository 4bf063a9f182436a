"""The launcher side of ``distmon run``: getting the hook into every rank of an unmodified job.
It imports the hooks and the endpoint; nothing of the watch side.

The job gets :data:`PYTHONPATH_DIR` first on its ``PYTHONPATH``; the ``sitecustomize``
there runs at start-up in every Python process of the job and hands over to
:mod:`distmon.launch.autoattach`, which attaches :func:`distmon.hooks.attach` in the
processes that are ranks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from distmon import endpoint
from distmon.launch.autoattach import MARKER

PYTHONPATH_DIR = Path(__file__).resolve().parent / "pythonpath"
FR_BUFFER_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
"""The Flight Recorder's buffer size, under its current and its older name."""
FR_ENTRIES = 2000
"""Entries the ranks' Flight Recorders keep under ``distmon run`` unless told otherwise:
torch 2.13's default, set for versions whose default is 0 (off)."""
NCCL_TIMING = "TORCH_NCCL_ENABLE_TIMING"
"""Set to 1 under ``distmon run`` unless the job sets it: NCCL then marks when each collective
starts on the GPU (a CUDA event), and a rank's pace counts the time its GPU waits in one for
its peers, not the time the collective is queued behind the rank's own work
(:mod:`distmon.hooks.pace_sampler`): on NCCL, the straggler's measure."""


def job_environment(job_endpoint: str, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for the job: distmon's ``sitecustomize`` first on the path, ranks told where to
    report, their Flight Recorders on (unless the job sets their size itself) and NCCL timing
    its collectives (unless the job says).

    A marker inherited from an enclosing monitored rank is dropped, so a job started from
    inside one is monitored in its own right.
    """
    job = {key: value for key, value in env.items() if key != MARKER}
    job["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHONPATH_DIR), env.get("PYTHONPATH")) if p)
    job[endpoint.ENV] = job_endpoint
    if not any(name in env for name in FR_BUFFER_VARIABLES):
        job[FR_BUFFER_VARIABLES[0]] = str(FR_ENTRIES)
    job.setdefault(NCCL_TIMING, "1")
    return job
