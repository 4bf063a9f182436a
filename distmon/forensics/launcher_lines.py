"""What launchers print of the workers they started and how each ended: torchrun's failure
table and its agent's lines, Open MPI's ``mpirun`` and its signal handler, Slurm's ``srun``.

A launcher says who ended and how (an exit code, a signal, an exception when torchrun's table
holds the traceback), never why; and it names the first failure it *observed*, which is the
first cause only where nothing timed out first. Shapes read::

    torchrun  [1]: / time : 2023-05-19_16:39:58 / host : n1 / rank : 1 (local_rank: 1) /
              exitcode : 1 (pid: 78971) / traceback : Signal 9 (SIGKILL) received by PID 78971
              (every entry of its ``Failures:``, and its ``Root Cause (first observed failure):``;
              torch 1.9-1.10: ``Root Cause:``, ``Other Failures:``, ``msg: "Signal 9 (SIGKILL) ..."``)
              failed (exitcode: -9) local_rank: 3 (pid: 407727) of binary: /usr/bin/python
    mpirun    mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed).
              (Open MPI 5's prterun breaks it: ... on node n1 exited on / signal 9 (Killed).)
              The first process to do so was: / Process name: [[29973,1],0] / Exit code: 1
              (Open MPI 5's prterun: Process name: [prterun-n1-4242@1,0])
              mpirun has exited due to process rank 3 with PID 42 on / node n1 calling "abort". ...
              mpirun has exited due to process rank 3 with PID 42 on / node n1 exiting improperly. ...
              Primary job  terminated normally, but 1 process returned / a non-zero exit code. ...
    horovodrun  Process 3 exit with status code 1. / RuntimeError: Horovod detected that one or more
              processes exited ... The first process to do so was: / Process name: 3 / Exit code: 1
    mpiexec   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES / =   RANK 3 PID 4242 RUNNING AT n1 /
              =   KILLED BY SIGNAL: 9 (Killed)            (Intel MPI's Hydra: one block a failed rank)
              =   PID 4242 RUNNING AT n1 / =   EXIT CODE: 9       (MPICH's Hydra: the first killed, by pid)
              [host:02773] Signal: Segmentation fault (11)       (Open MPI's handler, by pid; [02773] without host)
    srun      srun: error: node-1: tasks 8-13,15: Exited with exit code 1
              srun: error: node-1: task 3: Killed
    mp.spawn  torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL
              Exception: process 3 terminated with exit code 1          (torch 1.x's wording)
              -- Process 3 terminated with the following error:         (it raised: its traceback next)
    deepspeed [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4242     (one line a worker)
              [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=7',
              ...] exits with return code = -9
              Main process received SIGINT, exiting                 (the launcher itself signalled)
    Lightning [rank: 1] Child process with PID 4242 terminated with code 1. Forcefully terminating all
              other processes to avoid zombies               (its subprocess launcher: child i is local rank i + 1)
    launch    subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', '--local_rank=1']'
              returned non-zero exit status 1.        (torch 1.x's launch.py, accelerate's, any subprocess)
              ... died with <Signals.SIGKILL: 9>.

A local rank (torchrun's agent line) is the rank on its node, a task (srun) the rank only where
srun started one task a rank, a process of ``mp.spawn`` its index, the rank on one node: they are
said, not taken for global ranks. The deepspeed launcher says a worker's return code, not whose:
the command its line prints is the last one it built, whichever worker failed (so where that
command is local rank 0's, the launcher started one worker, which is the one that failed); so
does torch 1.x's ``torch.distributed.launch``, raising ``CalledProcessError`` with the command of
its spawning loop's last turn, and Python says nothing else of whom. Before either, the
deepspeed launcher's handler says ``Killing subprocess`` once for each worker it started, failed
or not: one such line is one worker, local rank 0, the one that failed (or the launcher was
signalled, which it then says). torchrun's
table ends in its root cause: the entry its closing ``====`` border follows is the first observed
failure, even where a paste cut the table's head.

Open MPI's ``mpirun`` (``orte_quit.c``, PRRTE's ``prte_quit.c``) names one process, the first to
end the job: killed by a signal, exited non-zero, called ``MPI_Abort``, or exited without
``MPI_Finalize`` where the others called it ("exiting improperly": it ended first, how it does not
say); its count of processes that returned non-zero names none. Intel MPI's Hydra prints a block for
each rank that ended badly, which one first it does not say (a block alone is the first); MPICH's
prints the first process its proxy found killed, by pid, its wait status as ``EXIT CODE``.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

from distmon.forensics.signal_handler import SignalHandler
from distmon.forensics.tracebacks import ISO, MAX_TRACEBACK_LINES, TRACEBACK, Traceback, utc
from distmon.forensics.worker_exits import (
    ENDS,
    LOCAL_RANK,
    MAX_TASKS,
    PROCESS,
    RANK,
    SELF,
    SIGNAL_NAMES,
    SPAWNED,
    TASK,
    WORKER,
    Words,
    WorkerExit,
)
from distmon.guards.text import visible

_TABLE_FIELD = re.compile(r"\s{0,8}(time|host|rank|exitcode|error_file|traceback|msg)\s{0,8}: ?(.*)")
_ENTRY = re.compile(r"\s{0,8}\[\d{1,9}\]:\s*$")
_SEPARATOR = re.compile(r"\s*(?:={20,}|-{20,})\s*$")
_SIGNAL = re.compile(r"Signal (\d{1,3}) \((SIG\w{1,10})\)", re.IGNORECASE)
_HEADS = re.compile(r"\s*(Root Cause(?: \(first observed failure\))?|(?:Other )?Failures)\s?:\s*$")
"""The table's two headings, as torch prints them (1.9-1.10: ``Root Cause:``, ``Other Failures:``)
or as a person retyped them (``... failure) :``)."""
_SQUASHED = re.compile(r"\brank\s?:?\s?(\d{1,9}) \(local[_ ]rank: ?\d{1,9}\)\s*exit ?code\s?:\s?(-?\d{1,9})")
"""An entry's rank and exit code run into one line, as a person retyped the table."""
_PID = re.compile(r"\(pid: (\d{1,9})\)")
"""torchrun's table's process id beside the exit code: ``exitcode : -9 (pid: 4203)``."""
_AGENT = re.compile(r"failed \(exitcode: (-?\d{1,9})\) local_rank: (\d{1,9}) \(pid: (\d{1,9})\)")
_CLOSING = re.compile(r"Sending process (\d{1,9})(?: c|\s*$)")
"""torchrun's agent closing its workers (``Sending process 52478 closing signal SIGTERM``): those still alive; its
line cut by a terminal's wrap past the pid as well."""
MAX_CLOSING = 1024
_NOTICED = re.compile(
    r"noticed that (?:process|job) rank (\d{1,9}) with PID \S{1,20} on node (?:\"?(\S{1,200}?)\"? )?exited on\s{1,8}"
    r"signal (\d{1,3})(?: \(([\w :]{1,40})\))?"
)
_EXITED_DUE = re.compile(
    r"has exited due to process rank (\d{1,9}) with PID \S{1,20} on\s{1,8}node (?:(\S{1,200}) )?"
    r"(calling\s{1,8}\"abort\"|exiting\s{1,8}improperly)"
)
"""mpirun's (and prterun's) first process to end the job by ``MPI_Abort``, or without ``MPI_Finalize``
where others called ``MPI_Init``: its help text breaks the sentence over two lines."""
_SENTENCE_STARTS = ("noticed that process rank", "noticed that job rank", "has exited due to process rank")
_NONZERO = re.compile(r"(?:Primary|Child) job\s{1,8}(?:\S{1,40}\s{1,8})?terminated normally, but (\d{1,9}) process")
"""mpirun's count of the processes that returned non-zero: which, its next block says, if any."""
_FIRST_PROCESS = "The first process to do so was"
_PROCESS_NAME = re.compile(r"Process name:\s*(?:\[(?:\[\d{1,12},\d{1,12}\]|[\w.@-]{1,200}),(\d{1,9})\]|(\d{1,9})\s*$)")
"""Open MPI's name of a process, ``[[29973,1],3]``, PRRTE's (Open MPI 5), ``[prterun-n1-4242@1,3]``,
or horovodrun's (its gloo launcher), the rank: ``3``."""
_HYDRA = re.compile(r"^=\s{1,8}RANK (\d{1,9}) PID \d{1,12} RUNNING AT (\S{1,200})")
_HYDRA_END = re.compile(r"^=\s{1,8}(?:KILLED BY SIGNAL: (\d{1,3})(?: \(([\w ]{1,40})\))?|EXIT STATUS: (-?\d{1,9}))")
"""Intel MPI's mpiexec (Hydra) on each rank that ended badly: ``BAD TERMINATION OF ONE OF YOUR
APPLICATION PROCESSES`` / ``=   RANK 3 PID 4242 RUNNING AT n1`` / ``=   KILLED BY SIGNAL: 9 (Killed)``
(or ``EXIT STATUS: 1``)."""
_HYDRA_PID = re.compile(r"^=\s{1,8}PID (\d{1,12}) RUNNING AT (\S{1,200})")
_HYDRA_STATUS = re.compile(r"^=\s{1,8}EXIT CODE: (\d{1,9})")
"""MPICH's Hydra (``pmiserv_cb.c``) on the first process its proxy found killed by a signal: ``=   PID
4242 RUNNING AT n1`` / ``=   EXIT CODE: 9``, the raw wait status (the signal, 128 more with a core)."""
_EXIT_CODE = re.compile(r"^\s*Exit code:\s*(-?\d{1,9})")
_SRUN = re.compile(
    r"srun: error: ([^\s:]{1,200}): tasks? ([\d,-]{1,4000}): "
    r"(Exited with exit code (\d{1,3})|Killed|Out Of Memory|Terminated|Aborted|Segmentation fault|Bus error"
    r"|Illegal instruction)"
)
_SPAWN_EXIT = re.compile(
    r"(?:ProcessExitedException|^Exception): process (\d{1,9}) terminated with "
    r"(?:signal (SIG[A-Z]{1,10})|exit code (-?\d{1,9}))"
)
_DEEPSPEED = re.compile(r"\] exits with return code = (-?\d{1,9})\s*$")
_KILLING = re.compile(r"Killing subprocess (\d{1,12})\s*$")
_RECEIVED = re.compile(r"Main process received (SIGINT|SIGTERM), exiting")
"""The deepspeed launcher's handler: a line for each worker it kills, and, where it was itself
signalled, which signal (``launch.py``'s ``sigkill_handler``)."""
_CHILD = re.compile(r"Child process with PID \d{1,12} terminated with code (-?\d{1,9})")
"""Lightning's subprocess launcher (``_ChildProcessObserver``), on the first child it found ended
non-zero, under ``[rank: i + 1]`` (its local rank)."""
_LOCAL_RANK_ARG = re.compile(r"'--local[_-]rank=(\d{1,9})'")
"""The local rank in the command the deepspeed launcher prints: its last worker's, so 0 where the
launcher started one worker on the node."""
_LAUNCHER = re.compile(r"Command '\[?'?(?:\S{0,200}/)?(?:deepspeed|torchrun|accelerate|mpirun|srun)['\s]")
"""A launcher's own command, which another ran (accelerate the deepspeed launcher): none of its workers'."""
_CALLED = re.compile(r"' (?:returned non-zero exit status (-?\d{1,9})|died with <Signals\.SIG\w{1,10}: (\d{1,3})>)")
"""Python's ``subprocess`` on a child that failed: its exit status, or the signal that ended it."""
_SRUN_SIGNALS = {
    "Killed": 9,
    "Out Of Memory": 9,
    "Terminated": 15,
    "Aborted": 6,
    "Segmentation fault": 11,
    "Bus error": 7,
    "Illegal instruction": 4,
}


_SHELL_KEYS = re.compile(r"Killed|Terminated|fault|Aborted|Bus error|Illegal|exception|Hangup")
_SIGNAL_WORDS = (
    r"(Killed|Terminated|Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception|Hangup)"
)
_SHELL = re.compile(
    rf"^\s{{0,8}}{_SIGNAL_WORDS}(?: \(core dumped\))?\s*$"
    rf"|^\S{{1,300}}: line \d{{1,6}}: {{1,8}}\d{{1,12}} {_SIGNAL_WORDS}(?: \(core dumped\))?"
    r"(?: {1,60}\S.{0,2000})?$"
)
"""A shell's word on a child a signal ended (``Killed``, ``Segmentation fault (core dumped)``,
bash's ``run.sh: line 3: 4242 Killed  python train.py``): strsignal's name, the whole line."""
_SHELL_WORDS = {
    "Hangup": 1,
    "Illegal instruction": 4,
    "Aborted": 6,
    "Bus error": 7,
    "Floating point exception": 8,
    "Killed": 9,
    "Segmentation fault": 11,
    "Terminated": 15,
}


@dataclass
class LauncherLines:
    """Reads a launcher's lines as they come, handing each exit to :attr:`kept` once whole (a
    table entry once the next starts, a separator or another line follows, or :meth:`flush`)."""

    kept: Callable[[WorkerExit], None]
    entry: WorkerExit | None = None
    root: bool = False
    """The entry being read is the table's root cause."""
    traceback: Traceback | None = None
    lines: int = 0
    """Lines of the entry's traceback read."""
    first_process: WorkerExit | None = None
    """mpirun's "The first process to do so was": its name, then its exit code, follow."""
    hydra: WorkerExit | None = None
    """mpiexec's (Hydra's) rank that ended badly: how, on the next line."""
    hydras: list[WorkerExit] = field(default_factory=list)
    """Intel MPI's blocks, one a rank that ended badly, kept to the log's end: a block alone is the
    first failure, several in its order say none (at most :data:`MAX_TASKS`)."""
    sentence: str | None = None
    """The first line of mpirun's sentence on the process that ended the job, which its help text
    breaks over two."""
    killing: int = 0
    """``Killing subprocess`` lines of the deepspeed launcher's handler read since its last end."""
    tasks: int = 0
    """srun's tasks read, within :data:`MAX_TASKS`: a line may name a range of any size, and the
    next line another."""
    opened: tuple[Words, str] | None = None
    """A line that began one of :data:`ENDS`' messages a help text breaks over two, and its words."""
    closing: set[int] = field(default_factory=set)
    """The pids torchrun's agent sent its closing signal."""
    agent: bool = False
    """torchrun's agent named the worker it found failed."""
    handler: SignalHandler = field(init=False)

    def __post_init__(self) -> None:
        self.handler = SignalHandler(self.kept)

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is a launcher's; False for any other line."""
        if self._table(body):
            return True
        if not body.strip() and self.entry is not None and self.traceback is None:
            return True  # a blank line a page's copy put after each line of torchrun's table
        self.flush()
        return (
            self._said(body)
            or self._agent(body)
            or self._closing(body)
            or self._mpirun(body)
            or self._srun(body)
            or self._spawned(body)
            or self._deepspeed(body)
            or self._called(body)
            or self.ranked(body, None)
        )

    def ranked(self, body: str, rank: int | None) -> bool:
        """What a process's own line says of its end, under the rank a launcher's label gives it
        (None: no label): Lightning's launcher on a child, a launcher's word of :data:`ENDS`, a signal
        handler's or a shell's word on a signal. Its rank is the label's; without one, a worker the log
        does not name."""
        if self.child(body, rank):
            return True
        if rank is not None and self._labelled(body, rank):
            return True
        if self.handler.line(body, rank):
            return True
        shell = _SHELL.match(body) if len(body) < 2400 and _SHELL_KEYS.search(body) else None
        if shell is None:
            return False
        number = _SHELL_WORDS[shell.group(1) or shell.group(2)]
        by = "the shell"
        if rank is None:
            self.kept(WorkerExit(WORKER, -1, -number, by, signal=SIGNAL_NAMES.get(number)))
        else:
            self.kept(WorkerExit(RANK, rank, -number, by, signal=SIGNAL_NAMES.get(number)))
        return True

    def _labelled(self, body: str, rank: int) -> bool:
        """A word of :data:`ENDS` under a rank's label: the rank it names, or, where it names none
        (``command terminated with exit code 137``, kubectl's on its exec), the label's (horovodrun's
        ``[0]<stderr>:``)."""
        found = next(((w, m) for w in ENDS if w.key in body and (m := w.pattern.search(body)) is not None), None)
        if found is not None:
            self._ended(*found, label=rank)
        return found is not None

    def _said(self, body: str) -> bool:
        """One of :data:`ENDS`, read anywhere in the line (joined with the line before where a help
        text broke it)."""
        opened, self.opened = self.opened, None
        if opened is not None:
            words, before = opened
            if (found := words.pattern.search(f"{before} {body.strip()}")) is not None:
                self._ended(words, found)
                return True
        for words in ENDS:
            if words.key not in body:
                continue
            found = words.pattern.search(body)
            if found is not None:
                self._ended(words, found)
                return True
            if words.joins:
                self.opened = (words, body[-400:])
                return True
        return False

    def _ended(self, words: Words, found: re.Match[str], label: int | None = None) -> None:
        named = found.groupdict()
        code = int(named["code"]) if named.get("code") is not None else words.code
        if named.get("ranks") is not None:
            ranks = [int(r) for r in re.findall(r"\d{1,9}", named["ranks"])[:MAX_TASKS]]
            for rank in ranks:
                first = words.first and len(ranks) == 1
                self.kept(WorkerExit(words.unit, rank, code, words.by, first=first, said=words.said))
            return
        who = int(named["who"]) if named.get("who") is not None else -1
        unit, who = (RANK, label) if label is not None and words.unit == WORKER else (words.unit, who)
        host = visible(named["host"], 200) if named.get("host") else None
        said = words.said if code is None else None
        if said is not None and named.get("why"):
            said = f"{said}: {visible(named['why'].strip(), 300)}"
        self.kept(WorkerExit(unit, who, code, words.by, host=host, first=words.first, said=said, aborted=words.aborted))

    def flush(self) -> None:
        """Keeps the table entry being read, as it stands (the table or the log ended)."""
        entry, self.entry, self.traceback = self.entry, None, None
        if entry is not None and (entry.code is not None or entry.first) and entry.who >= 0:
            self.kept(entry)  # the root cause, its exit code cut, still says who failed first

    def finish(self) -> None:
        """At the log's end: the table entry being read, Intel MPI's blocks (the first failure
        only where one block stands alone), the deepspeed launcher's kills whose end the paste cut."""
        self.flush()
        if self.first_process is not None and self.first_process.who >= 0:
            self.kept(self.first_process)  # named, its exit code cut: still the first to fail
        self.first_process = None
        for block in self.hydras:
            block.first = len(self.hydras) == 1
            self.kept(block)
        self.hydras = []
        if self.killing:
            self._workers(None, None)
        if not self.agent:
            self._gap()

    def _closing(self, body: str) -> bool:
        found = _CLOSING.search(body) if "Sending process" in body else None
        if found is None:
            return False
        if len(self.closing) < MAX_CLOSING:
            self.closing.add(int(found.group(1)))
        return True

    def _gap(self) -> None:
        """torchrun's agent sends its closing signal only to the workers still alive. It starts them in
        local-rank order, their pids one after another on a quiet host: where three pids or more it
        signalled run on but for one between them, that one had ended first, and its place in the run is
        its local rank."""
        pids = sorted(self.closing)
        steps = [b - a for a, b in pairwise(pids)]
        if len(pids) < 3 or sorted(steps) != [1] * (len(steps) - 1) + [2]:
            return  # two pids: the one ended may as well be past them
        local = steps.index(2) + 1
        missing = f"pids {pids[0]}-{pids[-1]} but {pids[0] + local}"
        said = f"what no line says, before torchrun's agent closed the others ({missing})"
        self.kept(WorkerExit(LOCAL_RANK, local, None, "torchrun", first=True, said=said))

    def child(self, body: str, rank: int | None) -> bool:
        """Lightning's subprocess launcher on the first child it found ended, its local rank the
        ``[rank: N]`` it puts before the line."""
        found = _CHILD.search(body) if "Child process with PID" in body else None
        if found is None:
            return False
        code = int(found.group(1))
        if rank is None:
            self.kept(WorkerExit(WORKER, -1, code, "Lightning's launcher", first=True))
        else:
            self.kept(WorkerExit(LOCAL_RANK, rank, code, "Lightning's launcher", first=True))
        return True

    def _table(self, body: str) -> bool:
        stripped = body.strip()
        heading = _HEADS.match(body)
        if heading or _ENTRY.match(body) or _SEPARATOR.match(body):
            if self.entry is not None and stripped.startswith("="):
                self.entry.first = True  # the table's closing border follows its root cause, and nothing else
            self.flush()
            if heading and heading.group(1).startswith("Root"):
                self.root = True
            elif not _ENTRY.match(body):
                self.root = False
            return True
        if self.traceback is not None and self.entry is not None and self.lines < MAX_TRACEBACK_LINES:
            self.lines += 1
            if self.entry.raised is None:
                self.entry.raised = self.traceback.line(body[2:] if body.startswith("  ") else body, self.entry.at)
            return True
        squashed = _SQUASHED.search(body) if "local" in body else None
        if squashed is not None:
            self.flush()
            who, code = squashed.groups()
            self.entry = WorkerExit(RANK, int(who), int(code), "torchrun", first=self.root)
            return True
        found = _TABLE_FIELD.match(body)
        if found is None:
            return False
        key, value = found.groups()
        if self.entry is None and not (key == "time" or "local_rank" in value):
            return False  # a line of the program's own, not of torchrun's table
        if self.entry is None:
            self.entry = WorkerExit(RANK, -1, None, "torchrun", first=self.root)
        self._field(self.entry, key, value)
        return True

    def _field(self, entry: WorkerExit, key: str, value: str) -> None:
        number = re.match(r"-?\d{1,9}", value)
        if key == "rank" and number:
            entry.who = int(number.group())
        elif key == "exitcode" and number:
            entry.code = int(number.group())
            entry.pid = int(pid.group(1)) if (pid := _PID.search(value)) else None
        elif key == "time" and (iso := ISO.match(value)):
            entry.at = utc(*iso.groups())
        elif key == "host":
            entry.host = visible(value.strip(), 200)
        elif key in ("traceback", "msg"):  # torch 1.9-1.10 says the signal in its msg
            signal = _SIGNAL.search(value)
            if signal:
                entry.signal = signal.group(2)
            if value.startswith(TRACEBACK):
                self.traceback, self.lines = Traceback(), 0

    def _agent(self, body: str) -> bool:
        found = _AGENT.search(body) if "local_rank" in body else None
        if found is None:
            return False
        code, local, pid = map(int, found.groups())
        self.kept(WorkerExit(LOCAL_RANK, local, code, "torchrun", first=True, pid=pid))
        self.agent = True
        return True

    def _mpirun(self, body: str) -> bool:
        if body.startswith("=") and self._hydra(body):
            return True
        if self._sentence(body):
            return True
        if "terminated normally" in body and (count := _NONZERO.search(body)) is not None:
            self.kept(WorkerExit(WORKER, -1, None, "mpirun", said="a non-zero exit code", count=int(count.group(1))))
            return True
        if _FIRST_PROCESS in body:
            by = "horovodrun" if "Horovod detected" in body else "mpirun"
            self.first_process = WorkerExit(RANK, -1, None, by, first=True)
            return True
        pending = self.first_process
        if pending is not None and (named := _PROCESS_NAME.search(body)):
            pending.who = int(named.group(1) or named.group(2))
            if pending.code is not None:
                self.first_process = None
                self.kept(pending)
            return True
        if pending is not None and pending.code is None and (code := _EXIT_CODE.match(body)):
            pending.code = int(code.group(1))  # a collector may put its line before the name's
            if pending.who >= 0:
                self.first_process = None
                self.kept(pending)
            return True
        return False

    def _sentence(self, body: str) -> bool:
        """mpirun's sentence on the process that ended the job, over the two lines its help text
        puts it on: killed by a signal, ``MPI_Abort`` called, or exited without ``MPI_Finalize``."""
        started = any(words in body for words in _SENTENCE_STARTS)
        if self.sentence is None and not started:
            return False
        text = body if started or self.sentence is None else f"{self.sentence} {body.strip()}"
        self.sentence = None
        noticed = _NOTICED.search(text)
        if noticed:
            rank, host, signal, name = noticed.groups()
            host = visible(host, 200) if host else None
            self.kept(WorkerExit(RANK, int(rank), -int(signal), "mpirun", host=host, first=True, signal=name))
            return True
        due = _EXITED_DUE.search(text)
        if due:
            rank, host, how = due.groups()
            aborted = how.startswith("calling")
            said = "called MPI_Abort" if aborted else "exited without MPI_Finalize, where the others called MPI_Init"
            host = visible(host, 200) if host else None
            self.kept(WorkerExit(RANK, int(rank), None, "mpirun", host=host, first=True, said=said, aborted=aborted))
            return True
        if started:
            self.sentence = body[-400:]
            return True
        return False

    def _hydra(self, body: str) -> bool:
        """Intel MPI's mpiexec, a rank that ended badly (which first, its blocks do not say); MPICH's,
        the first process its proxy found killed, by pid."""
        if (rank := _HYDRA.match(body)) is not None:
            self.hydra = WorkerExit(RANK, int(rank.group(1)), None, "mpiexec", host=visible(rank.group(2), 200))
            return True
        if (pid := _HYDRA_PID.match(body)) is not None:
            self.hydra = WorkerExit(PROCESS, int(pid.group(1)), None, "mpiexec", host=visible(pid.group(2), 200))
            return True
        pending = self.hydra
        if pending is not None and pending.unit == PROCESS and (waited := _HYDRA_STATUS.match(body)) is not None:
            number = int(waited.group(1)) & 0x7F  # a wait status: the signal, 0x80 set where it dumped core
            pending.code, pending.first, self.hydra = (-number if number else None), True, None
            self.kept(pending)
            return True
        if pending is None or pending.unit != RANK or (end := _HYDRA_END.match(body)) is None:
            return False
        signal, name, status = end.groups()
        pending.code, pending.signal = (-int(signal), name) if signal else (int(status), None)
        self.hydra = None
        if len(self.hydras) < MAX_TASKS:
            self.hydras.append(pending)
        return True

    def _srun(self, body: str) -> bool:
        found = _SRUN.search(body) if "srun: error:" in body else None
        if found is None:
            return False
        host, tasks, how, code = found.groups()
        number = int(code) if code is not None else -_SRUN_SIGNALS[how]
        named = task_list(tasks, MAX_TASKS - self.tasks) if self.tasks < MAX_TASKS else []
        self.tasks += len(named)
        oom = "Out Of Memory" if how == "Out Of Memory" else None  # Slurm's cgroup, told apart from a kill
        for task in named:
            self.kept(WorkerExit(TASK, task, number, "srun", host=visible(host, 200), signal=oom))
        return True

    def _spawned(self, body: str) -> bool:
        """``mp.spawn``'s join: the first process it found ended, by a signal or an exit code."""
        found = _SPAWN_EXIT.search(body) if "terminated with" in body else None
        if found is None:
            return False
        index, name, code = found.groups()
        number = int(code) if code is not None else -_signal_number(name)
        by = "torch.multiprocessing.spawn"
        self.kept(WorkerExit(SPAWNED, int(index), number, by, first=True, signal=name))
        return True

    def _deepspeed(self, body: str) -> bool:
        """The deepspeed launcher's handler: ``Killing subprocess N`` for each worker it started, then
        ``... exits with return code = -9`` (a worker's, which one it does not say), or ``Main
        process received SIGINT, exiting`` where it was itself signalled."""
        if "Killing subprocess" in body and _KILLING.search(body):
            self.killing += 1
            return True
        if "Main process received" in body and (received := _RECEIVED.search(body)) is not None:
            self.killing = 0
            number = int(signal.Signals[received.group(1)])
            self.kept(WorkerExit(WORKER, -1, -number, "the deepspeed launcher", signal=received.group(1), said=SELF))
            return True
        found = _DEEPSPEED.search(body) if "exits with return code" in body else None
        if found is None:
            return False
        self._workers(int(found.group(1)), _LOCAL_RANK_ARG.search(body))
        return True

    def _workers(self, code: int | None, last: re.Match[str] | None) -> None:
        """A worker of the deepspeed launcher ended: local rank 0 where the launcher started one (one
        ``Killing subprocess`` line, or the command it prints, the last it built, is local rank 0's);
        else one it does not name. Its code None where the paste cut the launcher's last line."""
        alone = self.killing == 1 or (last is not None and last.group(1) == "0")
        workers = "its only worker" if alone else f"its {self.killing} workers"
        cut = f"a failure or a signal to the launcher (its handler killed {workers}; the line saying which is cut)"
        said = None if code is not None else cut
        by = "the deepspeed launcher"
        if alone:
            self.kept(WorkerExit(LOCAL_RANK, 0, code, by, first=True, said=said))
        else:
            self.kept(WorkerExit(WORKER, -1, code, by, first=True, said=said))
        self.killing = 0

    def _called(self, body: str) -> bool:
        """A launcher's ``CalledProcessError`` on a worker: its exit, not whose (the command shown is the last
        it built, local rank 0's where it started one worker; or a launcher's own, run by another)."""
        found = _CALLED.search(body) if "CalledProcessError: Command '" in body else None
        if found is None:
            return False
        code = int(found.group(1)) if found.group(1) is not None else -int(found.group(2))
        last, ran = _LOCAL_RANK_ARG.search(body), _LAUNCHER.search(body)
        unit, who = (LOCAL_RANK, 0) if last is not None and last.group(1) == "0" else (WORKER, -1)
        self.kept(WorkerExit(unit, who, code, "Python's subprocess" if ran else "the launcher", first=True))
        return True


def _signal_number(name: str) -> int:
    """``SIGKILL`` as 9; 0 for a name this platform does not know."""
    try:
        return int(signal.Signals[name])
    except KeyError:
        return 0


def task_list(text: str, most: int = MAX_TASKS) -> list[int]:
    """``8-13,15`` as the tasks it names, within ``most`` (:data:`MAX_TASKS`)."""
    found: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            continue
        first, last = int(low), int(high or low)
        if first > last or last - first + len(found) >= most:
            continue
        found.extend(range(first, last + 1))
    return found
