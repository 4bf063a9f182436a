"""Evidence in words for people, shared by the rules, the reports, ``distmon analyze`` and the
terminal UI, each phrase written once: rank lists, counts, sizes, durations, group names, an
exception's first line, a collective in flight and the time left to its timeout, and where a
rank is (its stack, classified by :mod:`distmon.monitor.state.whereabouts`, its DataLoader
wait, the send or receive it blocks in)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from distmon.monitor.state.array_sets import distinct, expand
from distmon.monitor.state.pace import RankPace
from distmon.monitor.state.whereabouts import classify, frame_lines
from distmon.node import looks
from distmon.node.looks import Reached
from distmon.wire import ANY_SOURCE, SEND, GroupStatus, Loader, Report, StackFrame, Worker

MAX_LISTED = 16


def ranks_text(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7, 9, 10]`` as ``0-3, 7, 9-10``; long lists end with a count. In
    arrays: the 131,071 ranks waiting for one are a span."""
    return _spans(_unique(ranks))


def rank_word(ranks: Iterable[int]) -> str:
    ordered = _unique(ranks)
    return f"rank {ordered[0]}" if len(ordered) == 1 else f"ranks {_spans(ordered)}"


def _unique(ranks: Iterable[int]) -> npt.NDArray[np.int64]:
    return distinct(ranks if isinstance(ranks, np.ndarray) else np.fromiter(ranks, dtype=np.int64))


def _spans(ordered: npt.NDArray[np.int64]) -> str:
    if not len(ordered):
        return ""
    breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
    starts, ends = ordered[np.r_[0, breaks]], ordered[np.r_[breaks - 1, len(ordered) - 1]]
    shown = zip(starts[:MAX_LISTED].tolist(), ends[:MAX_LISTED].tolist(), strict=True)
    spans = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in shown)
    more = len(starts) - MAX_LISTED
    return spans + f" and {more} more spans" if more > 0 else spans


def count(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 host``, ``2 hosts``: a number with its noun, singular or plural."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


FIRST_LINE = 160
"""Characters of an exception's first line quoted in a headline or a row."""
FIRST_LINE_IN_DETAIL = 400
"""Characters of it quoted in an alert's detail, which has the width."""


def first_line(message: str, limit: int = FIRST_LINE) -> str:
    """An exception's message as a headline or a row quotes it: its first line, cut to
    ``limit`` characters with an ellipsis (:data:`FIRST_LINE_IN_DETAIL` in an alert's detail)."""
    line = (message.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def dropped_words(dropped: Mapping[str, int]) -> str:
    """``3 malformed, 1 no_key``: messages dropped, by reason; empty for none."""
    return ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()))


def unwatched_words(unwatched: Mapping[str, int]) -> str:
    """``21s monitor_paused_s``: seconds the monitor did not watch, by why; empty for none."""
    return ", ".join(f"{duration(n)} {why}" for why, n in sorted(unwatched.items()))


MAX_HOSTS_NAMED = 4


def blind_words(hosts: list[str]) -> str:
    """``node-b: no relay, judged from its reports only``: the hosts no eye watches
    (:meth:`~distmon.monitor.state.job.JobState.unwatched_hosts`); empty for none."""
    if not hosts:
        return ""
    named = ", ".join(hosts[:MAX_HOSTS_NAMED]) + (
        f" and {len(hosts) - MAX_HOSTS_NAMED} more" if len(hosts) > MAX_HOSTS_NAMED else ""
    )
    its = "its" if len(hosts) == 1 else "their"
    return f"{named}: no relay, judged from {its} reports only"


def stackless_words(ranks: Iterable[int], why: str | None) -> str:
    """``ranks 0-3: their stacks could not be taken from outside (permission denied ...)``:
    the ranks found from outside whose stacks are missing
    (:meth:`~distmon.monitor.state.job.JobState.stackless`); empty for none."""
    ranks = list(ranks)
    if not ranks:
        return ""
    their = "its stack" if len(ranks) == 1 else "their stacks"
    return f"{rank_word(ranks)}: {their} could not be taken from outside ({why or 'py-spy found no frame'})"


REACH_WORDS = {
    looks.UNREACHABLE: (
        "not reached over {how} ({detail})",
        "check that `ssh {host}` works from here without a password, or look there",
    ),
    looks.NO_DISTMON: (
        "distmon cannot run there ({detail})",
        "pip install distmon (it brings what it needs) in the job's Python there",
    ),
    looks.OTHER_VERSION: ("another distmon there ({detail})", "install the same distmon on every node"),
    looks.NO_PYSPY: ("its ranks were found but not judged: {detail}", "pip install py-spy in the job's Python there"),
    looks.SILENT: ("it did not answer ({detail})", "is it overloaded? look again, or look there"),
    looks.ENDED: ("its eye ended early ({detail})", "look again, or look there"),
    looks.REFUSED: ("its eye refused: {detail}", "look there"),
}
"""What each way a node reached can fare means, and what to do, with ``{host}``, ``{how}`` and ``{detail}``."""


def reach_line(r: Reached) -> str:
    """``node-b: not reached over ssh (Permission denied (publickey)): check that ...``; empty
    for a node seen."""
    if r.state == looks.SEEN or r.state not in REACH_WORDS:
        return ""
    what, todo = REACH_WORDS[r.state]
    how = "Slurm (srun)" if r.how == looks.SLURM else r.how
    return f"{r.host}: {what.format(how=how, detail=r.detail)}: {todo.format(host=r.host)}"


def date_time(t: float) -> str:
    """``2025-03-07 14:03:09``, in the local time zone: a moment in a report or a bundle, read
    days later."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def time_of_day(t: float) -> str:
    """``14:03:09``, in the local time zone: a moment in what is read as it happens (the terminal
    UI, the log lines of alerts, a note on an alert)."""
    return time.strftime("%H:%M:%S", time.localtime(t))


def group_name(gid: str, g: GroupStatus) -> str:
    """``group 7 (mesh_tp, ranks 4-5)``: the description users gave, and always the ranks (``2 of ranks 0-3``: a
    log's group whose size its works say, its members some of those, which the log does not say)."""
    desc = f"{g.desc}, " if g.desc else ""
    members = expand(g.ranks)
    some = f"{g.size} of " if g.size < len(members) else ""
    return f"group {gid} ({desc}{some}ranks {ranks_text(members)})"


def group_label(gid: str, desc: str | None) -> str:
    """``mesh_tp``, else ``group 7``: a group named short, where its ranks are said beside it
    or do not matter (a chart's legend, a list of last collectives); else :func:`group_name`."""
    return desc or f"group {gid}"


def in_flight(g: GroupStatus) -> bool:
    """The group has collectives issued and not completed (its oldest, ``completed + 1``, is
    the one ``op`` and ``since`` describe)."""
    return g.enqueued > g.completed


def timeout_left(g: GroupStatus, age: float) -> float | None:
    """Seconds until the collective timeout of ``g`` fires for a collective in flight ``age``
    seconds (negative: past it); None where the group has no timeout."""
    return g.timeout - age if g.timeout else None


def slower(share: float) -> str:
    """How much slower a job steps for a hold-up of ``share`` of its time: it would step in
    ``1 - share`` of it without."""
    return f"{share / (1 - share):.0%}"


def pace_words(pace: RankPace | None) -> str:
    """A rank's pace as its detail and the report tell it."""
    if pace is None:
        return "not known yet: it has sampled its steps for too few reports, or is stalled"
    waits = f"waits in collectives {pace.waits:.0%} of the time"
    if pace.peers is None or pace.holds is None:
        return f"{waits}, with no peer in a group of collectives to set it against"
    if not pace.holds:
        return f"{waits}, its peers {pace.peers:.0%}: it holds nobody up beyond chance"
    held = f"it holds them up {pace.holds:.0%} of the time"
    return f"{waits}, its peers {pace.peers:.0%}: {held}, and the job steps {slower(pace.holds)} slower for it"


def where(frame: StackFrame | None) -> str:
    if frame is None:
        return "an unknown place"
    return f"{frame.file}:{frame.line} in {frame.func}"


def stack_lines(frames: list[StackFrame] | None, depth: int = 4, indent: str = "    ") -> list[str]:
    """Where a stalled rank is, in words, then the user's innermost frame first and the
    ``depth`` innermost library frames it called (see :mod:`distmon.monitor.state.whereabouts`)."""
    if not frames:
        return [f"{indent}(no stack: the rank had not stalled when it last reported)"]
    return [f"{indent}{classify(frames).words}:", *frame_lines(frames, depth, indent + "  ")]


def traceback_lines(frames: list[StackFrame], depth: int = 8, indent: str = "    ") -> list[str]:
    """The innermost ``depth`` frames of a traceback, innermost last, with their source lines."""
    lines = []
    for f in frames[-depth:]:
        lines.append(f"{indent}{f.file}:{f.line} in {f.func}")
        if f.code:
            lines.append(f"{indent}    {f.code}")
    return lines


def rank_lines(report: Report, depth: int = 4, indent: str = "    ") -> list[str]:
    """A stalled rank's whereabouts; for a DataLoader wait, also the worker that owes the
    batch and that worker's own stack; for a send or receive, with whom."""
    lines = stack_lines(report.stack, depth, indent)
    for c in report.p2p:
        if c.blocked is not None and c.blocked_since is not None:
            peer = "any rank" if c.peer == ANY_SOURCE else f"rank {c.peer}"
            op = f"send #{c.blocked} to {peer}" if c.dir == SEND else f"recv #{c.blocked} from {peer}"
            waited = duration(report.t - c.blocked_since)
            lines.append(f"{indent}blocked in {op} (group {c.group}; {c.completed} of {c.posted} done) for {waited}")
    if report.stack and classify(report.stack).kind == "dataloader":
        for number, loader in enumerate(report.loaders, 1):
            if loader.waiting is not None or report.outside is not None:
                lines.extend(_loader_lines(report, loader, number, indent))
    return lines


def _loader_lines(report: Report, loader: Loader, number: int, indent: str) -> list[str]:
    waited = f" for {duration(report.t - loader.since)}" if loader.since else ""
    worker = next((w for w in loader.workers if w.id is not None and w.id == loader.worker), None)
    batch = f"batch #{loader.waiting}" if loader.waiting is not None else "a batch"
    head = f"{indent}DataLoader iterator {number} ({loader.expected} workers) waits{waited} for {batch}"
    if worker is None and report.outside is not None:
        return [
            head + " (seen from outside: which worker owes it cannot be told; the workers:)",
            *[line for w in loader.workers for line in _worker_lines(w, indent)],
        ]
    if worker is None:
        return [head + ", which no live worker owes (the workers are being restarted, or it is in order)"]
    state = "alive" if worker.alive else f"dead ({worker.signal or f'exit code {worker.exitcode}'})"
    return [head + f" from worker {worker.id} (pid {worker.pid}, {state})", *_worker_lines(worker, indent)]


def _worker_lines(worker: Worker, indent: str) -> list[str]:
    name = f"worker {worker.id}" if worker.id is not None else f"worker pid {worker.pid}"
    if worker.stack:
        return [f"{indent}{name} is {classify(worker.stack).words}:", *frame_lines(worker.stack, 3, indent + "  ")]
    if worker.stack_error:
        return [f"{indent}{name}'s stack could not be taken: {worker.stack_error}"]
    if worker.alive:
        return [f"{indent}{name}'s stack: being taken (py-spy)"]
    return []
