"""A job's log read for what each rank said last: the collective its NCCL watchdog timed out in
(:mod:`~distmon.forensics.watchdog`), the Python exception it raised (:mod:`~distmon.forensics.tracebacks`), the
error of its own device, or nothing; and what the job's own accounts said of it: how the launchers saw each worker
end (:mod:`~distmon.forensics.launcher_lines`), torch's desync report and debug checks, Horovod's stall inspector,
NCCL's lines, a lost peer, the stacks pasted, the main process's work alone, each known in its own module.

A line's rank is torchrun's ``[rankN]:`` prefix wherever it stands (after docker or logging stamps, a host name,
a progress bar), else the bare ``[Rank N]`` of old torch, else the group-local rank of the default group. The log
is first put back into the lines the ranks wrote (:mod:`~distmon.forensics.pasted`). A watchdog line that names no
group (``[Rank 0] Watchdog caught ...`` of torch 2.0-2.5) is the work a line of the same rank with a PG prefix
names, where one does; alone, it is of the world group, as in old torch, unless the rank has several such waits,
which are then of groups the log does not name. A rank's ``[rankN]:``-prefixed Python traceback is its last words,
as are the traceback under ``mp.spawn``'s ``-- Process N terminated``, a launcher's first observed failure of a
global rank and a prefixed exception line without its traceback; one with no rank is kept apart (``unplaced``).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import IO

from distmon.forensics.failures import PROGRAM
from distmon.forensics.launcher_lines import LauncherLines
from distmon.forensics.logfacts import STEP_CANCELLED, Layout, LogFacts, Timeout
from distmon.forensics.nccl import MAX_GROUP
from distmon.forensics.pasted import Written, lines_as_written
from distmon.forensics.tracebacks import FRAME, ISO, TRACEBACK, Raised, Traceback, alone, unlabelled_exception, utc
from distmon.forensics.watchdog import DEFAULT_PG, OPTIONS, PG, WORLD_GROUP, Said, pg_prefix, watchdog_said
from distmon.forensics.worker_exits import PROCESS, RANK, SPAWNED, TASK, TEARDOWN, WorkerExit

MAX_UNPLACED = 16
"""Exceptions with no rank kept from one log."""
MAX_EXITS = 1 << 17
"""Workers' exits kept from one log."""

_RANK = re.compile(r"\[rank(\d{1,9})\]: ?")
_GLOG = re.compile(r"\[[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
"""c10's glog-like stamp: its month unpadded (``[E918 19:29:24.4`` is September 18th), its
day padded (``[E109`` is January 9th), as glog pads both (``[E0918``)."""
STAMP_SPAN = 80
"""Where a docker or logging stamp may stand in a line: at its start, before the rank's prefix."""
_WORLD = re.compile(
    r"global_world_sizes=\[(\d{1,9})|dist_world_size=(\d{1,9})|MEMBER: ?\d{1,9}/(\d{1,9})|Num processes: ?(\d{1,9})"
    r"|Rank of current process: \d{1,9}\. World size: (\d{1,9})|using world size: (\d{1,9})"
    r"|^\s{0,8}world_size \.{3,} (\d{1,9})\s*$|\bGPU number: (\d{1,9})\s*$"
    r"|Completed store-based barrier for key:\S{1,200} with (\d{1,9}) nodes"
    r"|\b(?:mpirun|mpiexec|horovodrun)\b.{0,400}?\s-np?[= ](\d{1,6})\b"
)
"""The world as launchers and frameworks print it (torchrun, DeepSpeed, Lightning, accelerate, detectron2, Megatron,
mmengine, mpirun's ``-np`` as SageMaker prints it), and torch's store-based barrier."""
_WORLD_WORDS = ("world_size", "MEMBER:", "Num processes", "orld size", "GPU number", "barrier ", " -np", " -n ")
_COMMAND = re.compile(
    r"(?:torchrun|torch\.distributed\.(?:run|launch))\b.{0,400}?--nproc[-_]per[-_]node[= ](\d{1,5})\b"
)
_NODES = re.compile(r"--nnodes[= ](?:(\d{1,6})\b(?!:)|\S)")
"""torchrun's command line: its processes a node, and its nodes (one where it does not say; none read where it
gives a range, ``--nnodes 1:4``, which the world may be any of)."""
_LISTED = re.compile(r"^\s*rank\s{0,8}: ?(\d{1,9}) \(local_rank: ?\d{1,9}\)|\bworld_rank=(\d{1,9}), local_rank=")
"""A rank torchrun's failure table lists, or Ray Train's list of the workers it started
(``- (ip=10.0.0.1, pid=5101) world_rank=3, local_rank=1, node_rank=1``): the world has at least as many."""
_SPAWNED = re.compile(r"-- Process (\d{1,9}) terminated with the following error:")
_JOIN = "multiprocessing/spawn.py"
"""Where ``mp.spawn``'s join raises the error of the process it found ended."""
_BAR = re.compile(r"(\d{1,3})%\|[^|]{0,400}\| *(\d{1,15})/(\d{1,15}) \[((?:\d{1,4}:)?\d{1,2}:\d\d)<")
"""tqdm's bar: its share, the items done of all, the time it has run."""
_BAR_RANK = re.compile(r"\b[Rr]ank[ =:]{0,2}(\d{1,6})\b")
"""A rank a bar's own description names (``Evaluating on rank=0:  75%|...``)."""
_FINISHED = re.compile(
    r"`Trainer\.fit` stopped|Training completed\. Do not forget to share your model"
    r"|\[-{10}\] Global test environment tear-down|destroy_process_group\(\) was not called before program exit"
)
"""The program had ended: Lightning's, transformers' Trainers' (rank 0's), googletest's, torch's at the exit; and
(``_LEFT``) a rank's own training loop, as torchtitan says it."""
_LEFT = re.compile(r"Ran out of data; last step was canceled|\bTraining completed\s*$")
_EXITING = re.compile(r"main process destroyed cuda before watchdog loop exited|CUDA error: driver shutting down")
"""torch's watchdog as its process exits (at INFO): its CUDA context torn down under it, ``driver shutting down``."""
_DEATH = re.compile(
    r"Received (?:(\d{1,3})|Signals\.(SIG(?:HUP|INT|QUIT|TERM|USR1|USR2))) death signal, shutting down workers"
)
"""torchrun's agent, on a signal sent to itself (SIGHUP, SIGTERM, SIGINT; by number or name): it ends its workers."""
_CANCELLED = re.compile(
    r"(STEP|JOB) [\w.]{1,40} ON \S{1,200} CANCELLED AT \S{1,40}(?: DUE TO ([A-Z][A-Z ]{0,40}[A-Z]))?"
)
"""slurmstepd's ``*** JOB 1234 ON node1 CANCELLED AT 2024-05-01T12:00:00 DUE TO TIME LIMIT ***``:
Slurm stopped the job (its time limit, a preemption, a node that failed; no reason: scancel, or of a step, srun)."""
_NODE_FAILED = re.compile(r"srun: error: Node failure on ([\w.-]{1,200})")
"""srun, when Slurm lost a node of the step (``srun: error: Node failure on gpu-node-07``)."""
_OOM_KILL = re.compile(r"Detected \d{1,9} oom[-_]kill event(?:s|\(s\))? in (?:step |StepId=)?[\w.]{0,39}\w")
"""slurmstepd, once the step's cgroup killed a process for memory (``Detected 1 oom-kill event(s) in
step 123.0 cgroup``, Slurm 21+: ``oom_kill event in StepId=123.0``)."""
_SRUN_AGENTS = re.compile(
    r"\bsrun\b.{0,300}?\s(?:torchrun|accelerate launch|deepspeed|python3? -m torch\.distributed\.run)\b"
)
"""srun starting a launcher on each node (``srun --ntasks-per-node=1 torchrun ...``): its tasks are nodes."""
_TERMINATING = re.compile(r"srun: Terminating (?:job step \d|StepId=\d)")
"""srun ending the step itself: a task failed (``--kill-on-bad-exit``), or srun was interrupted twice."""
_ANNOUNCED = re.compile(r"GLOBAL_RANK: ?(\d{1,9}), MEMBER: ?\d{1,9}/\d{1,9}")
"""Lightning's word as each process joins (``initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/4``)."""
_BLOCK = re.compile(r"\s*-{5,}(Begin|End) global rank (\d{1,9}) STD(?:OUT|ERR)-{5,}\s*$")
"""Composer's launcher around a failed rank's output, which it kept in a file while the rank ran."""
_WORKER_CRASH = re.compile(
    r"^ERROR: (Unexpected (?:segmentation fault|bus error|floating-point exception) encountered in worker\.)"
)
"""torch's handler in a DataLoader worker (``DataLoader.cpp``) on the signal that kills it: the rank's data
pipeline crashed (its main process says ``DataLoader worker (pid N) is killed by signal`` next)."""
_CHECK_TIMEOUT = re.compile(r"WorkNCCL::checkTimeout|Exception raised from checkTimeout")
"""A frame of the watchdog's timeout, in its C++ backtrace: a collective timed out on some rank."""
_JOB = re.compile(
    r"torch[./](?:distributed|multiprocessing|nn[./]parallel[./]distributed)|\bc10d?::|libtorch|libc10"
    r"|ProcessGroup|NCCL|\bgloo\b|OpType="
    r"|CUDA (?:error|out of memory|kernel errors)|OutOfMemoryError|CUDA_LAUNCH_BLOCKING|ChildFailedError|torchrun"
    r"|mpirun|Primary job|MPI_ABORT|srun: error|horovod|deepspeed|accelerate/commands|vendor err \d"
)
"""Words only a distributed PyTorch job's processes, its launchers, NCCL or MPI print: an excerpt
with no rank's line and no account of one that holds them is still a job's log (its frames in
``torch/distributed``, libtorch's C++ frames, a CUDA error, the end of an NCCL warning), judged
as what it is, with nothing to judge where it proves nothing."""


def _went_on(facts: LogFacts, tracebacks: dict[int, Traceback], rank: int, body: str) -> bool:
    """A line of a rank of its own (not a traceback's: its header, a frame, a line of code under one; nor a lone word,
    any line's start where the paste ends) after another rank raised, from one neither raised nor seen going on."""
    if rank in facts.raised or rank in tracebacks or rank in facts.went_on or len(body.split()) < 2:
        return False
    return not (body[:1].isspace() or TRACEBACK in body or TRACEBACK.startswith(body.strip()) or FRAME.match(body))


_CARET = re.compile(r"\s{0,200}[~^]{0,200}\^[~^]{0,200}\s{0,8}")
"""Python's marker under the code an error points at (``    ^``, ``~~~^^^``)."""


@dataclass
class _Reader:
    facts: LogFacts
    year: int
    stamp: float | None = None
    """The last time a line gave: an unstamped traceback's."""
    host: str = ""
    """The node pdsh says the line being read came from."""
    skew: float = 0.0
    """How far the job's own clock (glog's stamps) stands from the clock of the stamps a logger
    or a collector put before its lines, as the last line with both says."""
    tracebacks: dict[int, Traceback] = field(default_factory=dict)
    launcher: LauncherLines = field(init=False)
    spawned: int | None = None
    """The process whose traceback ``torch.multiprocessing.spawn`` is printing."""
    block: int | None = None
    """The rank whose output Composer's launcher is printing between its ``Begin`` and ``End`` lines."""
    nameless: Traceback | None = None
    """A traceback no rank prefixes, nor ``mp.spawn`` names."""
    headers: int = 0
    """Tracebacks of several processes begun in :attr:`nameless`, interleaved line by line."""
    job: bool = False
    """A line of the log holds a job's words (:data:`_JOB`)."""
    begun: bool = False
    """A line of the log has been read: a paste's first line is read apart."""
    marked: bool = False
    """The last line no rank prefixes was Python's caret under a line of code (a SyntaxError's)."""
    assumed: bool = False
    """A glog stamp was read before any line gave the year: the log's times stand in this year, which
    a later line's year does not make its own."""
    after: int | None = None
    """The rank whose traceback the last line added to, its exception line still to come."""
    by_spawn: set[int] = field(default_factory=set)
    """The process indexes whose tracebacks ``mp.spawn`` printed, read as ranks."""
    seen_by_spawn: set[int] = field(default_factory=set)
    """Those of them no line of the rank's own showed: heard from only through spawn's word."""

    def __post_init__(self) -> None:
        self.launcher = LauncherLines(self._exit)

    def line(self, written: Written) -> None:
        line = written.text
        self.host = written.host
        if "global rank" in line and (block := _BLOCK.match(line)) is not None:
            self.block = int(block.group(2)) if block.group(1) == "Begin" and int(block.group(2)) < MAX_GROUP else None
            return
        if self.block is not None and ("composer.cli.launcher" in line or line.startswith("Global rank ")):
            self.block = None  # the launcher's own line: the block's End was cut from the paste
        prefix = _RANK.search(line)
        rank = int(prefix.group(1)) if prefix else self.block
        at = self._time(line, written.stamp)
        if at is not None:
            self.stamp = at
        if rank is not None:
            self.facts.seen.add(rank)
            self.seen_by_spawn.discard(rank)
            self.facts.matched += 1
        self._world(line)
        self._progress(line, rank)
        found = watchdog_said(line)
        if found is not None:
            self._watchdog(found, rank, at)
        elif "initialization options" in line:
            self._layout(line)
        body = line[prefix.end() :] if prefix else line
        if rank is not None and self.facts.raised and _went_on(self.facts, self.tracebacks, rank, body):
            self.facts.went_on.add(rank)
        self._accounts(body, rank if rank is not None else self.spawned)
        after, self.after = self.after, None
        if rank is not None:
            if not self.launcher.ranked(body, rank):
                self._traceback(rank, body, lone=found is None)
            self.after = rank if rank in self.tracebacks and self.tracebacks[rank].raised is None else None
        elif after is not None and self.nameless is None and unlabelled_exception(body):
            self._traceback(after, body)  # the rank's exception line, right under its last frame, its label lost
        elif not self._spawn(body) and not self._launched(body):
            self._nameless(body)
            if written.repeated and FRAME.match(body):  # a frame Ray says more processes wrote: a job's line
                self.facts.folded, self.facts.matched = max(self.facts.folded, written.repeated), self.facts.matched + 1
        # a paste's blank lines before its first are not its start, nor a traceback's source line above its error
        self.begun = self.begun or bool(line.strip() and not line[:1].isspace())
        if not self.job and _JOB.search(line):
            self.job = True
            self.facts.matched += 1

    def finish(self) -> None:
        """What the log ended in the middle of: a launcher's table, tracebacks cut before their exception line."""
        self.launcher.finish()
        self.facts.stacks.finish({e.pid: e.who for e in self.facts.exits if e.unit == RANK and e.pid is not None})
        self.facts.closed = frozenset(self.launcher.closing)
        self.facts.reported = frozenset(self.launcher.handler.reported - self.launcher.handler.aborted)
        consequences = any(r.consequence for r in self.facts.raised.values())
        for rank, building in self.tracebacks.items():
            cut = building.cut(self.stamp)
            if cut is not None:
                self.facts.stores.traceback(rank, cut.frames, cut.in_collective)
                self.facts.main_only.waited(rank, cut.frames, cut.in_collective)
                self.facts.cut_waiting += cut.in_collective
                if cut.in_collective:
                    inner = cut.frames[-1]
                    self.facts.cut_in[rank] = f"{inner.func} ({os.path.basename(inner.file)}:{inner.line})"
            if cut is not None and not consequences and not cut.in_collective:
                self._raised(rank, cut)
        self._respawned()
        ended = [e for e in self.facts.exits if e.unit == PROCESS]  # by pid: the launcher's started workers'
        placed = {e.who: r for e in ended if (r := self.facts.deepspeed.rank_of(e.who)) is not None}
        self.facts.exits += [replace(e, unit=RANK, who=placed[e.who], pid=e.who) for e in ended if e.who in placed]
        nameless = self.facts.cut_nameless = self.nameless.cut(self.stamp) if self.nameless is not None else None
        if nameless is not None:
            waits = len(self.facts.stores.main_first)
            self.facts.stores.traceback(None, nameless.frames, nameless.in_collective)
            self.facts.main_only.waited(None, nameless.frames, nameless.in_collective)
            self.facts.cut_waiting += nameless.in_collective
            self.facts.matched += len(self.facts.stores.main_first) > waits  # a process's wait: a job's line
        self._placed()
        self._ray_placed()
        self.facts.seen |= self.facts.debug.running.keys() | self.facts.stacks.ranked | self.facts.crashes.ranked
        self.facts.ray.finish()
        self.facts.place()

    def _placed(self) -> None:
        """The one traceback no label places, beside the one rank a launcher alone says failed (by an
        exit code: a signal ends a process with no exception): that rank's (Composer's launcher prints its
        local rank 0's output unlabelled, torch before 2.2 labelled no worker's lines)."""
        facts = self.facts
        told = [rank for rank, r in facts.raised.items() if r.launcher is not None and not r.type.startswith("Signal")]
        if len(told) != 1 or len(facts.unplaced) != 1 or sum(e.first for e in facts.exits) > 1:
            return
        [raised] = facts.unplaced
        if not (raised.cut or raised.launchers or raised.stopped):  # not a launcher's own, nor a stop
            facts.unplaced.clear()
            self._raised(told[0], raised)

    def _ray_placed(self) -> None:
        """Tracebacks a Ray driver printed of its tasks that raised, each in the rank whose pid Ray Train's list of
        its workers gives the task's process."""
        facts = self.facts
        for raised in list(facts.unplaced):
            rank = facts.ray.ranks.get(raised.ray_pid) if raised.ray_pid is not None else None
            if rank is not None and rank not in facts.raised:
                facts.unplaced.remove(raised)
                self._raised(rank, raised)

    def _time(self, line: str, stamp: str) -> float | None:
        """The glog stamp ``[E1124 03:12:44.123456789`` (its year that of the log's other
        stamps, else this year's), else the stamp a logger or a collector put before the line,
        else a docker or logging stamp near its start, put on the job's clock where a line
        with both showed how far apart the two are (a collector's clock is UTC, glog's the
        node's); read as UTC, as only the differences between lines count."""
        iso = ISO.match(stamp) or ISO.search(line, 0, STAMP_SPAN)
        if iso:
            self.year = self.year if self.assumed else int(iso.group(1))  # glog's times before stand in one year
            self.facts.dated = self.facts.dated or not self.assumed
        outer = utc(*iso.groups()) if iso else None
        glog = _GLOG.search(line)
        if glog is None:
            return None if outer is None else outer + self.skew
        self.assumed = self.assumed or not self.facts.dated  # its year this year's, the times before read so
        at = utc(self.year, *glog.groups())
        if at is not None and outer is not None:
            self.skew = at - outer
        return at

    def _world(self, line: str) -> None:
        world = _WORLD.search(line) if any(words in line for words in _WORLD_WORDS) else None
        if world:
            self.facts.world = max(self.facts.world or 0, int(next(g for g in world.groups() if g)))
        if "nproc" in line and (command := _COMMAND.search(line)) is not None:
            nodes = _NODES.search(line, command.start())
            if nodes is None or nodes.group(1) is not None:
                count = int(command.group(1)) * (int(nodes.group(1)) if nodes is not None else 1)
                self.facts.world = max(self.facts.world or 0, min(count, MAX_GROUP))
        listed = _LISTED.search(line) if "local_rank" in line else None
        if listed and (rank := int(listed.group(1) or listed.group(2))) < MAX_GROUP:
            self.facts.listed = max(self.facts.listed or 0, rank)

    def _progress(self, line: str, rank: int | None) -> None:
        """A progress bar (tqdm's), a training loop's end, torchrun's agent signalled itself, or
        Slurm cancelling the job."""
        facts = self.facts
        if "%|" in line and (bar := _BAR.search(line)) is not None:
            percent, done, total, elapsed = bar.groups()
            short = int(percent) < 100 and int(done) < int(total)
            named = _BAR_RANK.search(line, max(0, bar.start() - 200), bar.start()) if rank is None else None
            drawer = int(named.group(1)) if named is not None else rank
            if short and (int(done) or elapsed.strip("0:")):  # a bar at its start, nothing done in no time: none yet
                facts.progress = (drawer, f"{percent}% ({done}/{total}) after {elapsed}")
            elif not short and facts.progress is not None and facts.progress[0] == drawer:
                facts.progress = None  # its bar ended; another rank's still short of its end stands
        if _FINISHED.search(line):
            facts.finished = True
        elif rank is not None and ("completed" in line or "out of data" in line) and (left := _LEFT.search(line)):
            facts.left.setdefault(rank, left.group().strip())
        exiting = "destroyed cuda" in line or "driver shutting down" in line
        if exiting and facts.exiting is None and (words := _EXITING.search(line)) is not None:
            facts.exiting = (f"rank {rank}'s process" if rank is not None else "a process", words.group())
            facts.matched += 1
        if "death signal" in line and (death := _DEATH.search(line)) is not None:
            number, name = death.groups()
            facts.signalled = int(number) if number else signal.Signals[name].value
            facts.signalled_at = self.stamp
            facts.matched += 1
        cancel = _CANCELLED.search(line) if "CANCELLED AT" in line else None
        if cancel is not None and facts.cancel(*cancel.groups()):
            failed = (
                facts.oom_killed is not None
                or facts.step_ended
                or any(e.unit == TASK and e.code not in TEARDOWN for e in facts.exits)
            )
            facts.cancelled_after = facts.cancelled in ("", STEP_CANCELLED) and failed
            facts.matched += 1
        if "Node failure on" in line and facts.failed_node is None and (node := _NODE_FAILED.search(line)) is not None:
            facts.failed_node, facts.cancelled = node.group(1), "NODE FAILURE"
            facts.matched += 1
        if "srun: Terminating" in line and _TERMINATING.search(line) is not None:
            facts.step_ended = True
            facts.matched += 1
        if "oom" in line and facts.oom_killed is None and (oom := _OOM_KILL.search(line)) is not None:
            facts.oom_killed = oom.group()
            facts.matched += 1
        if "srun" in line and not facts.agents_under_srun and _SRUN_AGENTS.search(line):
            facts.agents_under_srun = True
        if "GLOBAL_RANK" in line and (announced := _ANNOUNCED.search(line)) is not None:
            rank = int(announced.group(1))
            if rank < MAX_GROUP and (rank in facts.announced or len(facts.announced) < MAX_EXITS):
                facts.announced[rank] = facts.announced.get(rank, 0) + 1
        if "checkTimeout" in line and not facts.timed_out and _CHECK_TIMEOUT.search(line):
            facts.timed_out = True
            facts.matched += 1

    def _watchdog(self, found: Said, rank: int | None, at: float | None) -> None:
        """A watchdog line: the rank from its prefix, else its bare ``[Rank N]`` (old torch,
        no group named), else its rank in the default group."""
        desc = found.desc or (DEFAULT_PG if found.group == WORLD_GROUP else None)
        if rank is None:
            rank = found.bare if found.group is None else found.local if desc == DEFAULT_PG else None
        self.facts.matched += 1
        self.facts.main_only.timed_out = True
        if found.fired_by is not None and found.fired_by < MAX_GROUP:
            self._fired(found.fired_by, at)
        if rank is None and found.fired:
            return  # names no work, no rank: says nothing of anyone
        if rank is None:
            self.facts.unplaced_lines += 1
            if len(self.facts.unplaced_said) < MAX_UNPLACED:
                self.facts.unplaced_said.append(found)
            return
        self.facts.seen.add(rank)
        if at is not None:
            self.facts.latest = max(self.facts.latest or at, at)
        if found.error is not None:
            kind, _, message = found.error.partition(": ")
            self._raised(rank, Raised(kind, message, [], at))
            return
        if found.group is None:
            timeout = Timeout(None)
            self.facts.loose.setdefault(rank, []).append(timeout)
        else:
            groups = self.facts.timeouts.setdefault(rank, {})
            timeout = groups.setdefault(found.group, Timeout(found.group))
            found.desc = desc
        timeout.take(found, at)

    def _fired(self, rank: int, at: float | None) -> None:
        """A rank whose watchdog fired, as the dump signal it sent the others says: it waited."""
        self.facts.seen.add(rank)
        if not self.facts.loose.get(rank) and rank not in self.facts.timeouts:
            self.facts.loose.setdefault(rank, []).append(Timeout(None, said_at=at))

    def _layout(self, line: str) -> None:
        """A group's size and one member, from the line torch prints as it creates the group
        (with ``TORCH_CPP_LOG_LEVEL=INFO``): even a rank that later says nothing printed it."""
        options = OPTIONS.search(line)
        pg = PG.search(line) if options else None
        if options is None or pg is None:
            return
        size, member = int(options.group(1)), int(options.group(2))
        name, desc, local = pg_prefix(pg)
        if size > MAX_GROUP or member >= MAX_GROUP:
            return
        self.facts.seen.add(member)
        self.facts.matched += 1
        if desc == DEFAULT_PG or name == WORLD_GROUP:
            self.facts.world = max(self.facts.world or 0, size)
            return
        layout = self.facts.layouts.setdefault(name, Layout(size))
        layout.size = max(layout.size, size)
        layout.members[local] = member

    def _accounts(self, body: str, rank: int | None) -> None:
        """A line of torch's reports (desync, fingerprint check, monitored barrier), Horovod's stall inspector,
        NCCL's own, a transport's on a lost peer, the store's, Ray's, a native crash's, or a stack dump's."""
        facts = self.facts
        read = (
            facts.desync.line(body, rank) is not None,
            facts.debug.line(body, rank),
            facts.fr_trace.line(body),
            facts.horovod.line(body),
            facts.grad_norms.line(body),
            facts.nccl.line(body),
            facts.peers.line(body, rank),
            facts.stores.line(body, rank),
            facts.ray.line(body),
            facts.deepspeed.line(body, self.stamp, self.host),
            facts.ras.line(body),
            facts.crashes.line(body, rank),
            facts.environment.line(body),
            facts.xids.line(body, self.host),
            facts.stacks.line(body, rank),
            facts.main_only.line(body, rank),
        )
        facts.matched += any(read)

    def _traceback(self, rank: int, body: str, lone: bool = False) -> None:
        """A line of the rank's traceback; with ``lone``, an exception line the paste holds
        without its traceback is one too (a watchdog's line is not: it says the rank waited)."""
        building = self.tracebacks.get(rank)
        told = self.facts.raised.get(rank)
        # a launcher's word alone: its own lines say more; a block of the rank's stderr Composer printed
        # once it ended holds its tracebacks in order, the last the one it died of
        open_ = told is None or told.launcher is not None or self.block == rank
        if body.startswith(TRACEBACK) or (building is None and FRAME.match(body)):
            if not open_:
                return
            building = self.tracebacks[rank] = Traceback.headed(body)
            if body.startswith(TRACEBACK):
                return
        if building is None:
            if open_ and (crash := _WORKER_CRASH.match(body)) is not None:
                self._raised(rank, Raised("ERROR", crash.group(1), [], self.stamp))
                return
            if lone and open_ and (begun := alone(body, self.stamp)) is not None:
                assert begun.raised is not None
                self.tracebacks[rank] = begun
                self._raised(rank, begun.raised)
            return
        raised = building.line(body, self.stamp)
        if raised is not None:
            self._raised(rank, raised)
        if building.done:
            del self.tracebacks[rank]

    def _raised(self, rank: int, raised: Raised) -> None:
        told = self.facts.raised.get(rank)
        if told is None or (told.launcher is not None and raised.launcher is None) or self.block == rank:
            if raised.frames:
                self.facts.stores.traceback(rank, raised.frames, raised.in_collective)
            self.facts.raised[rank] = raised  # its own traceback says more than a launcher's word
        if raised.launcher is None:
            self.facts.seen.add(rank)  # a launcher's word is not a line of the rank's own
        if raised.at is not None:
            self.facts.latest = max(self.facts.latest or raised.at, raised.at)

    def _spawn(self, body: str) -> bool:
        """``mp.spawn``'s ``-- Process N terminated with the following error:``: the traceback
        under it is process N's, its rank on one node."""
        found = _SPAWNED.search(body)
        if found:
            self.spawned = int(found.group(1))
            said = "an exception (its traceback under spawn's line)"
            self._exit(WorkerExit(SPAWNED, self.spawned, None, "torch.multiprocessing.spawn", first=True, said=said))
            unplaced = self.facts.unplaced
            if unplaced and not unplaced[-1].message and any(_JOIN in f.file for f in unplaced[-1].frames[-1:]):
                unplaced.pop()  # spawn's join raising the error it prints next: not a process's own
            return True
        if self.spawned is None or not body.strip():
            return False
        fresh = self.spawned not in self.facts.seen
        self._traceback(self.spawned, body)
        if fresh and self.spawned in self.facts.seen:
            self.seen_by_spawn.add(self.spawned)
        if self.spawned in self.facts.raised:
            self.by_spawn.add(self.spawned)
        if self.spawned not in self.tracebacks:
            self.spawned = None
        return True

    def _respawned(self) -> None:
        """A process ``mp.spawn`` names by its index is that rank only where the job ran on one node:
        where another rank raised the same under its own prefix, that is the process; where the rank
        of that number shows its own wait, the process is another node's, its rank unknown."""
        facts = self.facts
        for index in sorted(self.by_spawn):
            raised = facts.raised.get(index)
            if raised is None or raised.consequence or raised.launcher is not None:
                continue
            twin = any(
                rank != index and (other.type, other.message) == (raised.type, raised.message)
                for rank, other in facts.raised.items()
                if rank not in self.by_spawn
            )
            if twin or index in facts.timeouts or index in facts.loose:
                del facts.raised[index]
                if twin and index in self.seen_by_spawn:
                    facts.seen.discard(index)  # the process was the twin's: rank ``index`` said nothing
                if not twin and len(facts.unplaced) < MAX_UNPLACED:
                    facts.unplaced.append(raised)

    def _launched(self, body: str) -> bool:
        """A launcher's line (:mod:`~distmon.forensics.launcher_lines`)."""
        return self.launcher.line(body)

    def _exit(self, exit: WorkerExit) -> None:
        """A worker's end as its launcher says it: a global rank's, the launcher's first
        observed failure or one whose traceback it holds, is that rank's last words (but a
        rank that timed out like its peers and left only an exit code: torchrun observed it
        first, no more)."""
        facts = self.facts
        facts.matched += 1
        if len(facts.exits) < MAX_EXITS:
            facts.exits.append(exit)
        if exit.unit != RANK or not 0 <= exit.who < MAX_GROUP:
            return
        facts.listed = max(facts.listed or 0, exit.who)
        if exit.who in facts.raised or not (exit.first or exit.raised is not None):
            return
        failure = exit.failure(timed_out=exit.who in facts.timeouts or exit.who in facts.loose)
        if failure is not None:
            self._raised(exit.who, failure)

    def _nameless(self, body: str) -> None:
        """A traceback no rank prefixes: its exception kept apart; several processes'
        tracebacks interleaved line by line end in as many exception lines in a row."""
        if body.startswith(TRACEBACK):
            fresh = self.nameless is None or self.nameless.raised is not None
            self.nameless = Traceback.headed(body) if fresh else self.nameless
            self.headers = 1 if fresh else self.headers + 1
            return
        building = self.nameless
        marked, self.marked = self.marked, _CARET.fullmatch(body) is not None
        if building is None and FRAME.match(body):
            building = self.nameless = Traceback()  # a paste begun inside a traceback: its header cut
            self.headers = 1
        if building is None:
            # a paste begun at the program's own error, or a SyntaxError under its caret: its frames cut above
            if (not self.begun or marked) and PROGRAM.match(body) and (begun := alone(body, self.stamp)) is not None:
                assert begun.raised is not None
                self._unplaced(begun.raised)
            return
        if building.raised is not None and self.headers > 1:
            again = Traceback(frames=building.frames).line(body, self.stamp)
            if again is not None:
                self.headers -= 1
                self._unplaced(again)
                return
        raised = building.line(body, self.stamp)
        if raised is not None:
            self._unplaced(raised)
        if building.done:
            self.nameless = None

    def _unplaced(self, raised: Raised) -> None:
        self.facts.stores.traceback(None, raised.frames, raised.in_collective)
        if len(self.facts.unplaced) < MAX_UNPLACED:
            self.facts.unplaced.append(raised)


def read_log(stream: IO[str] | Iterable[str], facts: LogFacts | None = None, year: int | None = None) -> LogFacts:
    """What the ranks said in one log (any size: read line by line)."""
    reader = _Reader(facts := facts or LogFacts(), year or time.gmtime().tm_year)
    for written in lines_as_written(stream):
        reader.line(written)
    reader.finish()
    return facts
