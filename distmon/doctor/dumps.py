"""Whether a hung job will leave the Flight Recorder dumps ``distmon analyze`` reads: torch
writes one per rank when NCCL's watchdog times a collective out, unless told not to, its
buffer is off, or the job runs on gloo (whose recorder is never dumped on a timeout)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from distmon.doctor.results import Check, passed, warned
from distmon.launch import FR_BUFFER_VARIABLES, FR_ENTRIES

DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
DUMP_FILE_VARIABLES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
"""Where each rank writes its dump, followed by its rank: current and older name."""
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
OFF = ("0", "false", "no", "off")


def dumps_check(env: Mapping[str, str], nccl: bool) -> Check:
    """Will each rank write a dump when a collective times out, and where."""
    name = "fr_dumps"
    if not nccl:
        return warned(
            name,
            "no NCCL here: torch writes Flight Recorder dumps on an NCCL watchdog timeout only, so a hung gloo "
            "job leaves none for distmon analyze",
            "run the job under distmon (distmon run) to see a gloo hang; on GPU nodes run this doctor there",
        )
    if env.get(DUMP_ON_TIMEOUT, "1").strip().lower() in OFF:
        return warned(
            name,
            f"{DUMP_ON_TIMEOUT}={env[DUMP_ON_TIMEOUT]}: a timed-out job writes no dump for distmon analyze",
            f"unset {DUMP_ON_TIMEOUT} (the dump on timeout is on by default)",
        )
    buffer = next((f"{v}={env[v]}" for v in FR_BUFFER_VARIABLES if v in env), None)
    if buffer is not None and buffer.partition("=")[2].strip() in ("0", ""):
        return warned(
            name,
            f"{buffer}: the Flight Recorder is off, so the dumps written on a timeout hold no entries",
            f"set TORCH_FR_BUFFER_SIZE={FR_ENTRIES}",
        )
    variable = next((v for v in DUMP_FILE_VARIABLES if v in env), None)
    prefix = env[variable] if variable else DEFAULT_PREFIX
    folder = os.path.dirname(prefix) or "."
    source = variable or "torch's default"
    where = f"{prefix}<rank> ({source})"
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return warned(
            name,
            f"dumps go to {where}, but {folder} is not a folder this user can write to",
            "set TORCH_FR_DUMP_TEMP_FILE to a writable path and prefix, e.g. /shared/job42/nccl_trace_rank_",
        )
    if variable is None:
        return warned(
            name,
            f"on a timeout each rank writes its dump to {where}: node-local, lost with the node",
            "set TORCH_FR_DUMP_TEMP_FILE to a prefix on shared storage, e.g. /shared/job42/nccl_trace_rank_",
        )
    return passed(name, f"on a timeout each rank writes its dump to {where}; read them with distmon analyze")
