"""Each rank's failure of its own, as a log shows it (its exception, how its launcher says it
ended, a native crash), and whether they failed alike: two ranks failing the same way at once
point to the program or its environment, not to a rank (:func:`alike`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from distmon.forensics.logfacts import LogFacts
from distmon.forensics.signal_handler import CRASHED
from distmon.forensics.tracebacks import Raised
from distmon.forensics.worker_exits import (
    ON_A_NODE,
    PROCESS,
    RANK,
    SELF,
    SIGABRT,
    SIGNAL_NAMES,
    SIGTERM,
    TASK,
    WORKER,
    WorkerExit,
)
from distmon.monitor.state.words import duration, rank_word
from distmon.wire.schema import StackFrame

TOGETHER = 1.0
"""Seconds within which failures, or ranks' timeouts in the same collective, count as at once."""


ALIKE = (
    "the program or its environment (a bad input or argument, a library or driver, memory too small for the "
    "batch), not a rank"
)


_DEVICE = re.compile(r"ECC error|\bXid\b|fallen off the bus|GPU is lost")
"""A GPU's own hardware fault: one device's, never every rank's alike."""
GPU_OWN = re.compile(r"out of memory|ECC error|\bXid\b|illegal memory access", re.IGNORECASE)
"""A failure one rank may meet alone in a step every rank takes alike: its GPU's memory or its GPU itself."""


SIGKILL = 9
NCCL_ERROR = re.compile(r"NCCL [Ee]rror|nccl\w{0,20}Error|DistBackendError|nccl[A-Z]\w{0,30} failed: ")
"""torch's words on a failed NCCL call: ``NCCL error in: ...`` (c10d), ``NCCL Error 1: unhandled cuda error``
(torch 1.x's ``torch.cuda.nccl``), NCCL's result names, torch 2's exception; another library's naming
NCCL's call (Horovod's ``ncclCommInitRank failed: unhandled system error``)."""
PEER_LOST = re.compile(
    r"unhandled system error|ncclSystemError|ncclRemoteError|remote process exit|[Cc]onnection (?:closed|reset)"
    r"|[Nn]etwork error"
)
"""NCCL's errors that may say a peer was lost (a socket failed, a remote process exited), not the rank's own
CUDA failure or misuse."""


UNALIKE = frozenset({SIGKILL, -SIGABRT, -SIGTERM})
"""Signals no sign that processes failed alike: sent from outside to each process for its own (the OOM
killer's pick, a launcher's teardown), or an abort that follows another's failure (a watchdog's, a
peer lost)."""
_TEARDOWN = frozenset({SIGKILL, -SIGTERM})
"""Signals a launcher ends its processes with (glog's handler reports SIGTERM too): no crash of their own."""


def own_failure(log: LogFacts) -> bool:
    """A rank raised an error of its own (not another's consequence, not a launcher's word)."""
    return any(is_own(r) for r in log.raised.values())


SHARED_MEMORY = (
    "the node's shared memory ran out (/dev/shm: a container's is 64 MB unless it is given more, docker run "
    "--shm-size or --ipc=host, a Kubernetes emptyDir of medium Memory), not a rank"
)


def is_own(raised: Raised) -> bool:
    return raised.own


@dataclass
class Failure:
    """A rank's (or a process's) failure of its own: its exception where the log holds it, how
    its launcher says it ended where one does."""

    who: str
    exception: str | None = None
    """Its exception as alike across ranks (:func:`_kind`: numbers left out)."""
    exit: str | None = None
    at: float | None = None
    said: str | None = None
    """Its exception as it was raised, to be shown."""


def alike(log: LogFacts) -> str | None:
    """Why no rank is to blame where two ranks or more failed, each the same way (the same
    exception where the log holds them, the same exit where it does not), at once, and nothing
    else failed: the program or its environment failed everywhere. Not where that exception is
    NCCL's on a peer it may have lost and the log shows a rank that raised none: it may be that peer."""
    failures = failures_of(log)
    failures += _cut_alike(log, failures)
    exceptions = kinds_apart({f.exception for f in failures if f.exception and f.exception != CUT})
    exits = {f.exit for f in failures if f.exit and f.exit != CRASHED}  # a crash whose signal is cut: any
    times = [f.at for f in failures if f.at is not None]
    if len(failures) < 2 or len(exceptions) > 1 or len(exits) > 1 or (times and max(times) - min(times) > TOGETHER):
        return None
    if any(f.exception is None for f in failures) and any(f.exit is None and f.exception != CUT for f in failures):
        return None  # one said by its exception only, another by its exit only: not comparable
    if exceptions and PEER_LOST.search(next(iter(exceptions))) and log.seen - _ranks(failures):
        return None
    if len(kinds_apart(_kind(r) for r in log.unplaced if not (r.cut or r.stopped or r.launchers))) > 1:
        return None  # the processes' words, placed on no rank, differ: one failed, the others of it
    if exceptions and _DEVICE.search(next(iter(exceptions))):
        return None  # each GPU's own fault, however many
    if any(e.unit == RANK and e.who not in _ranks(failures) and e.code == -SIGKILL for e in log.exits):
        return None  # another rank killed (its node's memory, the OOM killer's pick): theirs may follow from it
    crashed = any(_WORKER_CRASH.search(e) for e in exceptions)  # a DataLoader worker's: no point a rank passes
    if _waited_for(log, failures) or (log.went_on - _ranks(failures) and not crashed):
        return None  # a rank waited for them, or went on past them: their failure was not every rank's
    spread = max(times) - min(times) if len(times) > 1 else None  # no times: when, the log does not say
    together = "" if spread is None else f" within {duration(spread)}" if spread >= 0.1 else " at once"
    said = [f.said for f in failures if f.said]
    how = said[0] if said and all(f.exception for f in failures) else next(iter(exits), CRASHED)
    how = CUT_SAID if all(f.exception == CUT for f in failures) else how
    why = SHARED_MEMORY if "SIGBUS" in how or "bus error" in how.lower() else ALIKE
    return f"{whom(failures)} failed alike{together} ({how}): {why}"


def folded(log: LogFacts) -> str | None:
    """Why no rank is to blame where the one failure the log shows is a traceback no label places, whose frames Ray
    says more processes wrote too (:attr:`LogFacts.folded`: its log deduplication folds others' same lines into
    one), and nothing else is shown failing or waiting: as many processes failed alike where one is shown."""
    raised = [r for r in log.unplaced if is_own(r)] or ([log.cut_nameless] if log.cut_nameless else [])
    if not log.folded or len(raised) != 1 or log.raised or shown_apart(log, set()) or log.waiting:
        return None
    first = raised[0]
    if first.in_collective or _DEVICE.search(f"{first.type}: {first.message}"):
        return None  # a wait, or each GPU's own fault, however many
    how = "in the same code, its exception line cut from the log" if first.cut else _said(first)
    return (
        f"{log.folded + 1} processes failed alike ({how}; Ray says {log.folded} more wrote its frames: "
        f"[repeated {log.folded}x across cluster]): {ALIKE}"
    )


FILES = re.compile(
    r"^(?:FileNotFoundError|FileExistsError|PermissionError|IsADirectoryError|NotADirectoryError)\b"
    r"|\[Errno (?:2|13|17|39)\]|^\w{0,40}Error: (?:[Ff]ile|[Pp]ath|[Dd]irectory) \S{1,300} (?:not found|does not exist)"
)
"""The file system's word on a path the program opens or creates (missing, already there, not allowed, a
directory not empty as it removes it: errno's ENOENT, EEXIST, EACCES, ENOTEMPTY), and a library's for a
data file it cannot find."""
FILES_WHY = (
    "a file the program opens or creates is missing, left by an earlier run, written by another process at "
    "once, or not allowed (its path, a directory not shared between the nodes, an earlier run's files in "
    "/dev/shm, a cache every process prepares at once): every rank runs "
    "the same program on the same files, so the program's set-up, not a rank"
)


def _beside(log: LogFacts) -> bool:
    """Something else the log shows: a rank waiting (in a collective, cut in one, at a monitored
    barrier) or going on after another raised, a native crash, a worker ended by a signal, a Ray
    actor dead, a process the kernel or Slurm killed for memory. Beside it, one rank's error is not
    every rank's."""
    return bool(
        log.waiting
        or log.cut_waiting
        or log.went_on - log.raised.keys()
        or (log.progress is not None and log.progress[0] not in log.raised)
        or log.debug.unanswering()
        or log.crashes.crashes
        or any(e.signal_number is not None and ended_in_failure(e, log) for e in log.exits)
        or log.ray.dead
        or log.oom_killed
    )


def shown_apart(log: LogFacts, ranks: set[int], after: bool = False) -> bool:
    """Whether the log shows a rank apart from ``ranks``, which failed: another rank's lines (waiting, going on, its
    own end; not a signal handler's report on it, which shows it ended too, how a paste may cut), a traceback cut in
    a collective, a launcher naming another global rank that ended of its own, a native crash, a Ray actor dead, a
    process killed for memory. Not a worker a launcher tore down: alive then, it
    may have been on its way to the same failure. Where it shows none, their failure may be every rank's, the
    others' lines left out of the paste. With ``after``, a rank's lines count only past where ``ranks`` failed
    (going on, waiting, failing otherwise): a line written before says nothing of how it ended."""
    shown = (log.went_on | log.waiting | log.raised.keys()) if after else log.seen
    return bool(
        shown - ranks - log.reported
        or log.cut_waiting
        or any(_apart(e, ranks) for e in log.exits)
        or log.debug.unanswering()
        or any(c.rank is not None and c.rank not in ranks for c in log.crashes.crashes)
        or log.ray.dead
        or log.oom_killed
    )


def failed_whole_or_cut(log: LogFacts) -> list[Raised]:
    """Every failure the log shows of a rank's or a process's own, its exception line read or cut from the log: no
    other's consequence, no launcher's word, no stop."""
    return [r for r in log.exceptions if not (r.consequence or r.launcher or r.stopped or r.launchers)]


def alone_said(log: LogFacts, failed: list[Raised], step: bool = False) -> tuple[str, str] | None:
    """Who raised ``failed`` (its ranks, or a process the log does not name) and what (the first exception line the
    log holds), where the log shows no rank apart from them nor waiting; None where it does. With ``step``
    (``failed`` raised in a step every rank takes alike), a rank a launcher says ended by an exit code of its own
    (no signal) failed with them: that step raises on every rank, and a launcher's table keeps no traceback."""
    ranks = {rank for rank, r in log.raised.items() if any(r is f for f in failed)}
    if step:
        ranks |= {e.who for e in log.exits if e.unit == RANK and e.who >= 0 and e.code is not None and e.code > 0}
    if shown_apart(log, ranks) or log.waiting:
        return None
    said = next(
        (f"{r.type}: {r.message[:200]}".removesuffix(": ") for r in failed if not r.cut),
        "its exception line cut from the log",
    )
    return (rank_word(sorted(ranks)) if ranks else "a process"), said


def one_kind(log: LogFacts, ranks: set[int]) -> bool:
    """The failures of ``ranks`` the log shows are of one kind (the same exception, numbers aside; a
    cut one any): what every rank may have met alike, not a failure of each one's own."""
    return len(kinds_apart(_kind(r) for rank, r in log.raised.items() if rank in ranks and not r.cut)) <= 1


def _apart(e: WorkerExit, ranks: set[int]) -> bool:
    """Another global rank a launcher says ended of its own (not one it tore down with SIGTERM: alive
    then, no more; a local rank, a task, a process may be the failed rank itself)."""
    return e.unit == RANK and e.who >= 0 and e.who not in ranks and e.code != SIGTERM


def device_fault(log: LogFacts, ranks: set[int]) -> bool:
    """One of ``ranks`` raised its GPU's own hardware fault: proof of it, whatever else the log shows."""
    return any(_DEVICE.search(f"{r.type}: {r.message}") for rank, r in log.raised.items() if rank in ranks)


PROGRAM = re.compile(
    r"^(?:\w+\.)*(?:ValueError|TypeError|KeyError|AttributeError|NameError|UnboundLocalError|NotImplementedError"
    r"|AssertionError|ImportError|ModuleNotFoundError|SyntaxError|IndentationError)\b"
    r"|^(?:\w+\.)*RuntimeError: (?:Expected all tensors to be on the same device|mat1 and mat2 shapes cannot be"
    r"|Error\(s\) in loading state_dict|Expected to have finished reduction in the prior iteration"
    r"|Expected to mark a variable ready only once|Your training graph has changed in this iteration"
    r"|element 0 of tensors does not require grad|Trying to backward through the graph a second time)"
    r"|^(?:\w+\.)*(?:RuntimeError: )?CUDA error: operation not permitted when stream is capturing"
)
"""Errors of the program's own code or configuration (a check of its arguments, a name or attribute
it lacks, a module not installed, tensors on two devices, a checkpoint of another model, a model
DDP's reducer cannot follow: parameters unused, or marked ready twice under reentrant checkpointing; a
CUDA graph captured around work that may not be, NCCL's watchdog's own queries among it):
the same in every rank, which runs the same code on the same configuration."""
_BATCH = re.compile(r"torch/utils/data/|in DataLoader worker process")
"""A batch being fetched: its sample is one rank's own (a corrupt image, a missing key, a sequence
longer than the rest, which a collate function stacks)."""
_WORKER_CRASH = re.compile(r"encountered in worker|DataLoader worker \(pid")
"""A DataLoader worker's crash (torch's handler in the worker, its rank's word on it): no point of the program a rank
passes, but a process of its own that dies when it dies (memory, shared memory, a library): ranks going on past it
have not passed it, and it may come to them yet."""
_FETCH = frozenset({"__getitem__", "__next__", "__iter__", "collate_fn", "fetch"})
"""The functions a dataset or a loader fetches a sample in, whichever library."""
_NUMBERS = re.compile(r"\b(?:nan|inf|not finite|non-finite)\b", re.IGNORECASE)
"""A check of the numbers (a loss or a gradient not finite): a rank's own data or GPU may have made them."""


_PYTHONS_OWN = re.compile(r"/lib/python3\.\d{1,2}/(?!site-packages/|dist-packages/)")
"""A file of Python's standard library: its ``__getitem__`` is a mapping's (a registry's lookup), no dataset's."""


def _batch(raised: Raised) -> bool:
    """Raised while fetching a batch: the sample is one rank's own."""
    return bool(_BATCH.search(raised.said)) or any(
        _BATCH.search(f.file)
        or (f.func in _FETCH and not _PYTHONS_OWN.search(f.file))
        or "collate" in f.func
        or "collate(" in (f.code or "")
        for f in raised.frames
    )


PROGRAM_WHY = (
    "an error of the program's own code or configuration, which every rank runs alike (a launcher stops the "
    "others at the first failure it sees, and a paste keeps one rank's traceback): fix it where it raised, "
    "not a rank"
)


def program_error(log: LogFacts) -> str | None:
    """Why no rank is to blame where every failure the log shows is one error of the program's own
    code or configuration (:data:`PROGRAM`; a path the file system refused is :data:`FILES`'s), raised
    by one rank or more (or a process the log does not name) at one place, not while fetching a batch,
    no rank is shown waiting for them or losing them and nothing else failed: a paste keeps one rank's
    traceback of what every rank raised. The last reading of all: the most a paste leaves to judgement."""
    own = [r for r in log.exceptions if is_own(r)]
    if not own or _beside(log) or any(r.consequence and not r.launchers for r in log.exceptions):
        return None  # a rank shown waiting, crashed or losing its peer did not raise it: not every rank's
    if len(kinds_apart(_kind(r) for r in own)) > 1 or len({(f.file, f.line) for r in own for f in r.frames[-1:]}) > 1:
        return None
    first = own[0]
    said = f"{first.type}: {first.message}"
    if not PROGRAM.search(said) or FILES.search(said) or _NUMBERS.search(said) or _batch(first):
        return None
    ranks = sorted(rank for rank, r in log.raised.items() if is_own(r))
    message = first.message.splitlines()[0][:200].rstrip(".") if first.message else ""
    who = rank_word(ranks) if ranks else "a process"
    return f"{who} raised {first.type}" + (f": {message}" if message else "") + f": {PROGRAM_WHY}"


MAX_SAID = 120
"""Characters of an exception's first sentence a verdict shows."""
CUT = "cut"
"""A failure whose traceback the paste cut before its exception line: alike any (:func:`_cut_alike`)."""
CUT_SAID = "in the same code, their exception lines cut from the log"
MIN_PATH = 3
"""Frames a cut traceback holds to place its rank in the code another failed in, past the script's entry."""


def _cut_alike(log: LogFacts, failures: list[Failure]) -> list[Failure]:
    """Ranks whose tracebacks the paste cut before their exception lines on the path of another
    rank's failure (:func:`cut_on_path`), where that failure is one every rank may meet alike:
    failures of the same kind, as far as the lines go."""
    own = [r for r in log.exceptions if is_own(r)]
    if not own or any(_batch(r) or not _alike_anywhere(f"{r.type}: {r.message}") for r in own):
        return []  # beside a failure a rank may meet alone (a GPU's fault, its sample), or none: waiters, perhaps
    named = {f.who.rsplit(" ", 1)[-1] for f in failures}  # a rank, or the same worker by its launcher's number
    cut = [rank for rank in cut_on_path(log) if str(rank) not in named]
    return [Failure(f"{RANK} {rank}", CUT, at=log.raised[rank].at) for rank in cut]


def cut_on_path(log: LogFacts) -> list[int]:
    """Ranks whose tracebacks the paste cut before their exception lines, where another rank's
    failure stands beside them and each traceback the log holds passes through where the others
    were cut (the same step of the same code). Not one cut in torch's collective calls (a rank that
    raised while waiting: another's consequence), nor beside a rank shown waiting or a native crash,
    nor one cut at the program's first frames (on the path of any error) or torn down by its launcher."""
    cut = {rank: r for rank, r in log.raised.items() if r.cut and not r.consequence and r.launcher is None}
    if not cut or _beside(log) or any(not r.frames for r in cut.values()):
        return []
    if not any(is_own(r) for r in log.exceptions) or any(len(r.frames) < MIN_PATH for r in cut.values()):
        return []
    if any(e.who in cut and e.unit in (RANK, *ON_A_NODE) and e.code in (SIGTERM, -SIGKILL) for e in log.exits):
        return []
    paths = [r.frames for r in log.raised.values() if (is_own(r) or r.cut) and r.frames]
    return sorted(cut) if _one_path(paths) else []


def _alike_anywhere(exception: str) -> bool:
    """A failure every rank may meet alike: out of memory (the same batch, the same model), an error of the
    program's own (:data:`PROGRAM`), a library's own check the code every rank runs trips (torch's ``INTERNAL
    ASSERT FAILED``); not a GPU's fault one rank meets alone."""
    internal = "INTERNAL ASSERT FAILED" in exception
    return "out of memory" in exception.lower() or internal or bool(PROGRAM.search(exception))


def _one_path(paths: list[list[StackFrame]]) -> bool:
    """Tracebacks on one path: the innermost frame of each is a frame of the deepest (one look at
    each, however many ranks the paste shows), or, where the paste cut the head of one of the two, they share no
    frame: windows of one stack the lines do not show apart."""
    deepest = max(paths, key=len)
    places = {(f.file, f.line) for f in deepest}
    return all((frames[-1].file, frames[-1].line) in places or _windows(frames, deepest) for frames in paths)


def _windows(one: list[StackFrame], other: list[StackFrame]) -> bool:
    """Two tracebacks, one cut at its head (not begun at a program's entry), that share no frame."""
    cut = one[0].func != "<module>" or other[0].func != "<module>"
    return cut and not {(f.file, f.line) for f in one} & {(f.file, f.line) for f in other}


def failures_of(log: LogFacts) -> list[Failure]:
    """Each rank's (or process's) failure of its own (a local rank's or a task's only where no
    launcher names global ranks: they are the same workers)."""
    found: dict[str, Failure] = {}
    for rank, raised in log.raised.items():
        if is_own(raised):
            found[f"{RANK} {rank}"] = Failure(f"{RANK} {rank}", _kind(raised), at=raised.at, said=_said(raised))
    if not found:
        found.update(_unnamed(log))
    ranked = any(e.unit == RANK for e in log.exits)
    same = (*ON_A_NODE, PROCESS)  # the ranks' workers again, where a launcher names the ranks
    root = _root(log)
    for e in log.exits:
        said = e.code is None and e.said is not None and e.said != SELF
        if (e.code is None and not said) or e.code == 0 or e.unit == WORKER:
            continue
        if e.signal_number in UNALIKE:
            continue
        if ranked and e.unit in same:
            continue
        if root is not None and e.by == root.by and e.at is not None and e.at > root.at + TOGETHER:
            continue  # torchrun tore it down once its first failure was seen: SIGTERM, SIGKILL 30 s on
        if e.unit == RANK and (own := log.raised.get(e.who)) is not None and (own.cut or own.consequence):
            continue  # its exception was another's consequence: its exit is that too
        if e.unit == RANK and (own := log.raised.get(e.who)) is not None and own.stopped:
            continue  # it was stopped by a signal: its exit is that
        failure = found.setdefault(f"{e.unit} {e.who}", Failure(f"{e.unit} {e.who}"))
        failure.exit = failure.exit if failure.exit and e.said == CRASHED else e.ended
        failure.at = failure.at if failure.at is not None else e.at
    _crashed(log, found)
    return list(found.values())


def _crashed(log: LogFacts, found: dict[str, Failure]) -> None:
    """Each native crash as a process's failure: by its rank where a label gives one, else by its pid
    (one a launcher's exit by pid names too), else the process a launcher says ended by the same
    signal, else one more process (the C++ runtime's ``terminate`` says no pid)."""
    unnamed = [f for f in found.values() if f.exception is None]
    for i, crash in enumerate(log.crashes.crashes):
        if not crash.signal or crash.signal in _TEARDOWN:
            continue  # no signal said (its exit says how it ended), or a handler's report of a launcher's teardown
        name = SIGNAL_NAMES.get(crash.signal)
        signal = f"signal {crash.signal}" + (f" ({name})" if name else "")
        kind = re.sub(r"[0-9]+", "N", crash.own)[:120] if crash.own else None
        if crash.rank is not None:
            who = f"{RANK} {crash.rank}"
        elif crash.pid is not None:
            who = f"{PROCESS} {crash.pid}"
        elif (twin := next((f for f in unnamed if f.exit == signal), None)) is not None:
            unnamed.remove(twin)
            twin.exception, twin.said = kind, crash.said
            twin.at = twin.at if twin.at is not None else crash.at
            continue
        else:
            who = f"{PROCESS} #{i}"
        failure = found.setdefault(who, Failure(who))
        failure.exit = failure.exit or signal
        failure.exception = failure.exception or kind
        failure.said = failure.said or crash.said
        failure.at = failure.at if failure.at is not None else crash.at


@dataclass(frozen=True)
class _Root:
    by: str
    at: float


def _root(log: LogFacts) -> _Root | None:
    """torchrun's root cause, where its table gives its time: a failure its table gives a later
    time was torchrun's teardown (``_close``: SIGTERM to every worker, SIGKILL to those alive
    30 s on), not a failure of its own."""
    root = next((e for e in log.exits if e.first and e.unit == RANK and e.by == "torchrun" and e.at is not None), None)
    return None if root is None or root.at is None else _Root(root.by, root.at)


def _unnamed(log: LogFacts) -> dict[str, Failure]:
    """Exceptions no rank prefixes, where the world the launcher printed has as many processes as
    the log shows tracebacks of and each is the same (every process raised it; a second copy of
    one process's traceback does not make two)."""
    own = [r for r in log.unplaced if is_own(r)]
    if len(own) < 2 or log.world != len(own) or len(kinds_apart(_kind(r) for r in own)) > 1:
        return {}
    return {f"{PROCESS} {i}": Failure(f"{PROCESS} {i}", _kind(r), at=r.at, said=_said(r)) for i, r in enumerate(own)}


SAYS_ENOUGH = 24
"""Characters of a message's first sentence that say the failure without its type: a wrapper re-raising it
(Horovod's ``HorovodInternalError``, torch's ``DistBackendError``) keeps the words and changes the type."""


def _kind(raised: Raised) -> str:
    """An exception as alike across ranks: its message's first sentence, numbers left out (each rank's OOM
    names its own GPU and sizes), and its type where the sentence is too short to say the failure alone."""
    sentence = re.split(r"\.\s", raised.message.split("\n")[0], maxsplit=1)[0]
    message = re.sub(r"\d+", "N", sentence)[:120]
    return message if len(message) >= SAYS_ENOUGH else f"{raised.type}: {message}" if message else raised.type


def kinds_apart(kinds: Iterable[str]) -> set[str]:
    """The kinds of exception apart, each one a strict prefix of another left out: the same exception,
    its line cut where the paste ends (``IndexError: too many i``)."""
    found = set(kinds)
    return {kind for kind in found if not any(_cut_of(kind, other) for other in found)}


def _cut_of(kind: str, other: str) -> bool:
    """``kind`` begins ``other``, its type aside (:func:`_kind` leaves out a long message's), and says a word."""
    message = kind.split(": ", 1)[-1]
    return other != kind and re.search(r"[A-Za-z]{3}", message) is not None and other.startswith((kind, message))


def _said(raised: Raised) -> str:
    """An exception as the verdict shows it: its type and its message's first sentence."""
    sentence = re.split(r"\.\s", raised.message.split("\n")[0], maxsplit=1)[0]
    sentence = sentence if len(sentence) <= MAX_SAID else sentence[: MAX_SAID - 1] + "…"
    return f"{raised.type}: {sentence}" if sentence else raised.type


def _waited_for(log: LogFacts, failures: list[Failure]) -> bool:
    """Other ranks wait for those that failed (in a collective they never joined): they got past the point
    where those failed, so the failure is those ranks' own (their data, their node), not every rank's. Only
    where each failure's rank is known (a rank, or a task where srun started a task a rank)."""
    ranks = _ranks(failures) | {
        int(f.who.split()[-1]) for f in failures if f.who.startswith(f"{TASK} ") and not log.tasks_are_nodes
    }
    return len(ranks) == len(failures) and bool(log.waiting - ranks)


def _ranks(failures: list[Failure]) -> set[int]:
    return {int(f.who.split()[-1]) for f in failures if f.who.startswith(f"{RANK} ")}


def whom(failures: list[Failure]) -> str:
    ranks = sorted(_ranks(failures))
    others = [f.who for f in failures if not f.who.startswith(f"{RANK} ")]
    units = {w.rsplit(" ", 1)[0] for w in others}
    parts = [rank_word(ranks)] if ranks else []
    if others:
        unit = units.pop() if len(units) == 1 else "worker"
        plural = "" if len(others) == 1 else "es" if unit.endswith("process") else "s"
        parts.append(f"{len(others)} {unit}{plural}")
    return " and ".join(parts)


def ended_in_failure(e: WorkerExit, log: LogFacts) -> bool:
    """A worker's end that is a failure of its own: not a clean exit, not the launcher's teardown
    (SIGTERM), not a SIGABRT beside ranks that timed out (their watchdogs abort them), not a
    launcher's word that says nothing of how, unless it is its first observed failure."""
    if e.code is None:
        return e.first and e.said is not None and e.said != SELF
    if e.code == 0 or e.code == SIGTERM or e.said == SELF:
        return False
    return e.code != SIGABRT or (e.first and not log.waiting)


_SHARED_MEMORY = "multiprocessing/shared_memory.py"
"""Python's POSIX shared memory, by name (``shm_open``): a name is the node's, whoever makes it, not one rank's path."""


def files_refused(log: LogFacts) -> str | None:
    """Where every failure the log shows is the file system's refusal of a path, and no process
    crashed nor a launcher saw another fail: raised by two ranks or more at the same line (or one
    whose traceback is cut on the way to it), or by a process the log does not name where no rank is shown
    waiting: every rank meets it alike. One rank's alone may be its own (a path only it opens): its
    exception names it; but not a shared memory segment's, whose name is the node's."""
    own = [r for r in log.exceptions if is_own(r)]
    if not own or log.crashes.crashes or not all(FILES.search(f"{r.type}: {r.message}") for r in own):
        return None
    where = {(f.file, f.line) for r in own for f in r.frames[-1:]}
    at = [
        rank
        for rank, r in log.raised.items()
        if r.launcher is None and {(f.file, f.line) for f in r.frames[-1:]} & where
    ]
    at = sorted({*at, *cut_on_path(log)})
    shared = all(r.frames and r.frames[-1].file.endswith(_SHARED_MEMORY) for r in own)
    if len(where) > 1 or (len(at) < 2 and any(is_own(r) for r in log.raised.values()) and not shared):
        return None
    if not at and log.waiting:
        return None  # a process's traceback beside ranks waiting: one the program caught, or that rank's own
    if any(ended_in_failure(e, log) and not (e.unit in (RANK, *ON_A_NODE) and e.who in at) for e in log.exits):
        return None  # a worker a launcher saw fail that is not one of those: a failure of its own
    said = own[0].message.splitlines()[0][:200].rstrip(".")
    whole = [rank for rank in at if is_own(log.raised[rank])]
    cut = sorted(set(at) - set(whole))
    cut_said = f" ({rank_word(cut)}'s traceback cut on its way there)" if cut else ""
    return f"{rank_word(whole) if whole else 'a process'} raised {own[0].type}: {said}{cut_said}: {FILES_WHY}"
