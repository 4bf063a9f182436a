"""The node's limits that break jobs in ways that look unrelated: shared memory, open files,
threads, cores."""

from __future__ import annotations

import os
import resource

from distmon.doctor.results import Check, failed, passed, warned

MiB = 1024 * 1024
SHM_BATCH = 64 * MiB
"""A generous size for one batch of a DataLoader worker, passed through /dev/shm."""
PREFETCH = 2
"""Batches each worker keeps in flight: PyTorch's default ``prefetch_factor``."""
MIN_OPEN_FILES = 4096
THREADS_PER_PROCESS = 16
"""Threads a rank or worker starts besides its OpenMP pool: gloo, NCCL, autograd, pin memory."""


def shm_check(total: int | None, free: int | None, ranks: int, workers: int | None) -> Check:
    """/dev/shm carries every batch from a DataLoader worker to its rank; too small, and a
    worker dies with a bus error or "No space left on device"."""
    if total is None or free is None:
        return warned("shm", "no /dev/shm on this machine", "DataLoader workers need shared memory; use num_workers=0")
    fix = (
        "give the container more /dev/shm (docker run --shm-size=16g or --ipc=host; "
        "Kubernetes: an emptyDir of medium Memory mounted on /dev/shm)"
    )
    if not workers:
        if total <= 64 * MiB:
            return warned(
                "shm", f"/dev/shm is {_size(total)}, a container's default: any DataLoader with workers may fail", fix
            )
        return passed(
            "shm", f"/dev/shm {_size(free)} free of {_size(total)} (give --workers N to check against your DataLoaders)"
        )
    processes = ranks * workers
    need = processes * PREFETCH * SHM_BATCH
    detail = f"/dev/shm {_size(free)} free of {_size(total)}; {ranks} ranks x {workers} workers"
    detail += f" x {PREFETCH} batches in flight"
    if free < processes * SHM_BATCH:
        return failed("shm", f"{detail} do not fit even at one {_size(SHM_BATCH)} batch each", fix)
    if free < need:
        return warned(
            "shm", f"{detail} need up to {_size(need)} with {_size(SHM_BATCH)} batches", fix + ", or fewer workers"
        )
    return passed("shm", f"{detail} fit ({_size(need)} at {_size(SHM_BATCH)} a batch)")


def open_files_check(soft: int, hard: int) -> Check:
    """Each tensor a worker hands over holds a file descriptor under PyTorch's default sharing
    strategy, and NCCL and gloo keep sockets to every peer."""
    if soft == resource.RLIM_INFINITY or soft >= MIN_OPEN_FILES:
        return passed("open_files", f"open files limit {_limit(soft)}")
    raise_to = MIN_OPEN_FILES * 16 if hard == resource.RLIM_INFINITY else min(hard, MIN_OPEN_FILES * 16)
    if raise_to > soft:
        fix = f"ulimit -n {raise_to} in the job script before the launcher"
    else:
        fix = f"raise the hard limit ({_limit(hard)}) in /etc/security/limits.conf"
        fix += ", or torch.multiprocessing.set_sharing_strategy('file_system')"
    return warned(
        "open_files", f"open files limit {soft}: ranks with DataLoader workers fail with 'Too many open files'", fix
    )


def processes_check(soft: int, in_use: int, ranks: int, workers: int, cpus: int) -> Check:
    """RLIMIT_NPROC counts the user's threads; torch starts an OpenMP pool in every process."""
    need = ranks * (1 + workers) * (cpus + THREADS_PER_PROCESS)
    if soft == resource.RLIM_INFINITY:
        return passed("processes", "no limit on processes and threads")
    detail = f"process/thread limit {soft}, {in_use} in use; the job may start about {need} threads"
    if soft - in_use < need:
        return warned(
            "processes",
            f"{detail}: 'can't start new thread' / 'Resource temporarily unavailable'",
            f"ulimit -u {max(soft, in_use + 2 * need)}, or OMP_NUM_THREADS to cap each pool",
        )
    return passed("processes", detail)


def cpus_check(cpus: int, ranks: int, gpus: int) -> Check:
    """CPU ranks (gloo) share the node's cores; more ranks than cores makes every step and
    collective slow and timeouts likely."""
    if gpus == 0 and ranks > cpus:
        return warned(
            "cpus",
            f"{ranks} CPU ranks on {cpus} cores: each rank gets less than a core",
            f"--nproc-per-node={cpus} or fewer, with OMP_NUM_THREADS=1",
        )
    return passed("cpus", f"{cpus} cores for {ranks} rank{'s' if ranks > 1 else ''} per node")


def machine_host_checks(ranks: int, workers: int | None, gpus: int) -> list[Check]:
    """The host checks with this machine's facts."""
    total: int | None
    free: int | None
    try:
        st = os.statvfs("/dev/shm")
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = free = None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    return [
        shm_check(total, free, ranks, workers),
        open_files_check(*nofile),
        processes_check(nproc[0], _threads_in_use(), ranks, workers or 0, cpus),
        cpus_check(cpus, ranks, gpus),
    ]


def _threads_in_use() -> int:
    import psutil

    uid, count = os.getuid(), 0
    for process in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = process.info["uids"], process.info["num_threads"]
        if uids is not None and uids.real == uid:
            count += threads or 0
    return count


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", MiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n // 1024} KiB"
