"""``worker_crash``: a DataLoader worker died, and why it most likely did."""

from __future__ import annotations

import re

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.process import said
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.words import FIRST_LINE_IN_DETAIL, first_line, size
from distmon.wire import Worker

PYTORCH_MESSAGE = re.compile(
    r"DataLoader worker \(pid\(?s?\)? ?(?P<pids>[\d, ]+)\)? "
    r"(?:is killed by signal: (?P<signal>[\w ]+)|exited unexpectedly)",
    re.IGNORECASE,
)
DELIBERATE = {"SIGTERM", "SIGINT", "SIGHUP"}
"""How workers are stopped on purpose (PyTorch's shutdown, the launcher's teardown): no crash."""
SIGNAL_WORDS = {
    "Killed": "SIGKILL",
    "Bus error": "SIGBUS",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
}


def worker_crash(job: JobState, ctx: Context) -> list[Finding]:
    findings = []
    for s in job.views(job.flagged(wire.FLAG_WORKER_DEAD | wire.FLAG_RAISED)):
        if s.report.exception is not None and not s.failed_on_its_own():
            continue  # stopped by a signal: its workers died in the same teardown (torchrun kills the group)
        dead = _dead_workers(s)
        if dead:
            findings.append(_finding(job, s, dead, ctx))
    return findings


def _dead_workers(s: RankState) -> list[Worker]:
    """Workers that died abnormally, from the rank's loader report or PyTorch's own error."""
    if s.report.exception is None and all(w.alive for loader in s.report.loaders for w in loader.workers):
        return []
    dead = {w.pid: w for loader in s.report.loaders for w in loader.workers if not w.alive and (w.signal or w.exitcode)}
    exc = s.report.exception
    match = PYTORCH_MESSAGE.search(exc.message) if exc else None
    if match:
        signal = match.group("signal")
        for pid in re.findall(r"\d+", match.group("pids")):
            dead.setdefault(
                int(pid),
                Worker(
                    pid=int(pid),
                    alive=False,
                    signal=SIGNAL_WORDS.get(signal.strip(), signal.strip()) if signal else None,
                ),
            )
    return sorted((w for w in dead.values() if w.signal not in DELIBERATE), key=lambda w: w.pid)


def _finding(job: JobState, s: RankState, dead: list[Worker], ctx: Context) -> Finding:
    r = s.report
    first = dead[0]
    how = (
        f"killed by {first.signal}"
        if first.signal
        else f"exited with code {first.exitcode}"
        if first.exitcode is not None
        else "exited unexpectedly (how, PyTorch's message does not say)"
    )
    pids = ", ".join(str(w.pid) for w in dead)
    summary = f"rank {r.rank}: DataLoader worker (pid {pids}) {how}"
    where = f" on {r.host} (pid {r.pid})" if r.pid else ""  # a log's rank: its process is not known
    lines = [f"rank {r.rank}{where}: DataLoader worker pid {pids} {how}."]
    for loader in r.loaders:
        alive = sum(w.alive for w in loader.workers)
        lines.append(f"  loader: {alive}/{loader.expected} workers alive")
    lines.append(f"Likely cause: {_likely_cause(first, s)}")
    if r.exception is not None:
        said_first = first_line(r.exception.message, FIRST_LINE_IN_DETAIL)
        lines.append(f"The rank then raised {r.exception.type}: {said_first}")
    doing = said(job, [r.rank], ctx)
    return Finding(
        f"worker_crash:{r.rank}", AlertKind.WORKER_CRASH, CRITICAL, [r.rank], summary, "\n".join(lines), doing
    )


def _likely_cause(worker: Worker, s: RankState) -> str:
    memory = s.report.memory
    if worker.signal == "SIGKILL":
        host = _room("host memory available", memory.host_available, memory.host_total) if memory else ""
        return (
            "the kernel's OOM killer, most often" + host + ". Check `dmesg -T | grep -i oom`; "
            "lower num_workers, prefetch_factor or batch size, or stop workers from copying "
            "large Python objects (copy-on-read of lists and dicts of the dataset)."
        )
    if worker.signal == "SIGBUS":
        shm = _room("/dev/shm free", memory.shm_free, memory.shm_total) if memory else ""
        return (
            "shared memory exhausted" + shm + ": batches pass through /dev/shm. Enlarge it "
            "(docker --shm-size, a larger tmpfs) or lower num_workers and prefetch_factor."
        )
    if worker.signal == "SIGSEGV":
        return "a crash in native code called from __getitem__ (an image or audio decoder, a C extension)."
    if worker.signal:
        return f"something sent it {worker.signal}: check what else runs on the node."
    if worker.exitcode is None:
        return (
            "most often the kernel's OOM killer (`dmesg -T | grep -i oom`), /dev/shm run out (a bus error), or a crash "
            "in native code called from __getitem__; with num_workers=0 the failure comes in the main process, "
            "where it says which."
        )
    return "an exception in the worker (its traceback is in the rank's stderr) or os._exit in the dataset code."


def _room(what: str, left: int | None, total: int | None) -> str:
    """`` (what: 1.2 GiB of 64.0 GiB)``, the memory left of a kind where the rank reported both
    numbers, else nothing."""
    return f" ({what}: {size(left)} of {size(total)})" if left is not None and total else ""
