"""Dumps read on every core, each batch in a worker process that may die.

Unpickling is the floor of a post-mortem (8192 dumps of 2000 entries are gigabytes), so the
dumps are spread over the machine's cores. A worker unpickles without walking the pickle
first (the walk is a loop in Python over every instruction, the unpickler's is in C), which
a hostile file could turn into a crash (a tuple nested a million deep), a hang (keys built to
share a hash) or a memory bomb: so a worker runs under an address-space limit and an alarm
per file that ends it, and whatever its death leaves unread is read again here, one file at a
time, by the walk that refuses such files and says why (:func:`distmon.flightrecorder.loading.load_dump`).

A worker sends back what the file says of its rank (:class:`~distmon.flightrecorder.fields.RankDump`,
a few groups and channels), never the dump itself.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import resource
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from distmon.flightrecorder.fields import RankDump, group_ranks, read_dump
from distmon.flightrecorder.loading import MAX_DUMP_FILE_BYTES, MAX_SECONDS, DumpError, load_dump
from distmon.guards.files import open_regular, why_not

MIN_PARALLEL = 16
"""Fewer dumps than this are read here: starting workers costs more than it saves."""
BATCH = 8
"""Dumps a worker reads for one message back."""
WORKER_MEMORY = 4 << 30
"""Address space a worker may grow by beyond what it started with: far more than the largest
dump it may read (:data:`~distmon.flightrecorder.loading.MAX_DUMP_FILE_BYTES`) makes."""


@dataclass
class Read:
    """What one dump file gave: its rank's groups and its groups' members, or why not."""

    path: str
    rank: int
    dump: RankDump | None = None
    configs: dict[str, list[int]] = field(default_factory=dict)
    problem: str | None = None


def read_one(path: str, rank: int, walk_first: bool = True) -> Read:
    """One dump, read within the reader's limits (``walk_first``) or, in a worker, without
    the walk; a bad file is a :class:`Read` with its ``problem``, never an exception."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_DUMP_FILE_BYTES:
                raise DumpError(f"{size >> 20} MiB, over the {MAX_DUMP_FILE_BYTES >> 20} MiB a dump may have")
            dump = load_dump(f.read(MAX_DUMP_FILE_BYTES + 1), walk_first=walk_first)
        configs = {}
        for name, config in dump.get("pg_config", {}).items():
            members = group_ranks(config)
            if isinstance(name, str) and members:
                configs[name] = members
        return Read(path, rank, read_dump(dump, configs, rank), configs)
    except DumpError as e:
        return Read(path, rank, problem=str(e))
    except OSError as e:
        return Read(path, rank, problem=why_not(path, e))
    except Exception as e:  # a file must not end the analysis of the others
        return Read(path, rank, problem=f"a dump this reader fails on ({type(e).__name__}): left out")


def read_all(files: list[tuple[str, int]], workers: int | None = None) -> Iterator[Read]:
    """Every ``(path, rank)`` read, in no particular order: on the machine's cores when there
    are enough of them and of the files, else here."""
    cores = workers or len(os.sched_getaffinity(0))
    if cores < 2 or len(files) < MIN_PARALLEL:
        for path, rank in files:
            yield read_one(path, rank)
        return
    batches = [files[i : i + BATCH] for i in range(0, len(files), BATCH)]
    unread: list[tuple[str, int]] = []
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(cores, len(batches)), mp_context=context, initializer=_limits) as pool:
        futures: list[tuple[list[tuple[str, int]], Future[list[Read]]]] = [
            (batch, pool.submit(_read_batch, batch)) for batch in batches
        ]
        for batch, future in futures:
            try:
                yield from future.result()
            except BrokenProcessPool:  # a worker died: it, or one it shared the pool with, read a bad file
                unread += batch
    for path, rank in unread:
        yield read_one(path, rank)


def _read_batch(batch: list[tuple[str, int]]) -> list[Read]:
    out = []
    for path, rank in batch:
        signal.alarm(int(MAX_SECONDS))  # its default action ends the worker: a file it cannot leave
        out.append(read_one(path, rank, walk_first=False))
        signal.alarm(0)
    return out


def _limits() -> None:
    """A worker's bounds: its address space, and an alarm that ends it rather than be caught.
    Its death is expected and answered: it prints no fatal-error report."""
    faulthandler.disable()
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + WORKER_MEMORY
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
