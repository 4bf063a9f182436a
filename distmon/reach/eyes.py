"""The nodes' eyes a command starts on the nodes of a job: over ssh, one connection a node, or
as one step of the job's Slurm allocation; all at once, so that 64 nodes take the time of one.

Each eye (``distmon eye`` on its node, :mod:`distmon.commands.eye`) is handed its orders on its
standard input (the key made for this command, the port it listens on, the job), answers with
one line (its host, its version, the jobs it found and their hosts), then reports to the port
as a relay does, until its standard input closes. So closing its input ends it; a command
killed closes it too (its pipes close with it), and an eye whose head is gone ends itself
(``distmon eye``'s lifeline). :meth:`Eyes.close` closes every input, then waits a moment, then
kills what is left of the ssh and srun processes here.

How each node fares is kept as :class:`~distmon.node.looks.Reached`, handed to the command's own
eye (:meth:`news`), which tells the monitor: a verdict then says what it could not see, and why.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import distmon
from distmon import keys
from distmon.guards.text import visible
from distmon.node.looks import (
    ENDED,
    MAX_FOUND,
    MAX_JOB,
    NO_DISTMON,
    NO_PYSPY,
    OTHER_VERSION,
    REFUSED,
    SEEN,
    SILENT,
    SLURM,
    SSH,
    UNREACHABLE,
    Reached,
)

SSH_ENV = "DISTMON_SSH"
"""The ssh command to reach nodes with, as a shell would split it (default ``ssh``): the user's
own ssh and its config either way; a test's own config (``ssh -F FILE``)."""
CONNECT_TIMEOUT = 5
"""Seconds ssh may take to connect to a node."""
ANSWER_WAIT = 20.0
"""Seconds a node's eye may take to answer (ssh, then Python and distmon starting, then a scan)."""
CLOSE_WAIT = 3.0
"""Seconds the eyes get to end once told, before what is left here is killed."""
MAX_LINE = 1 << 16
MAX_DETAIL = 300
"""Characters kept of what a node or its ssh said."""
MISSING = 3
"""The exit code of the remote script where no Python there can run the eye."""
SCRIPT = """lacks=""
for p in "$@"; do
  m=$("$p" -c 'try:
    import distmon.node.relay
except ImportError as e:
    print("".join(c for c in e.name or "?" if c.isalnum() or c in "._"))' 2>/dev/null)
  case $? in
    0) [ -z "$m" ] && exec "$p" -m distmon eye ;;
    126|127) m="-" ;;
    *) m="!" ;;
  esac
  lacks="$lacks $m"
done
printf '{"host": "%s", "refused": "no_distmon", "lacks": "%s"}\\n' "$(hostname)" "${lacks# }"
exit 3"""
"""Run on each node by ``sh``: the first of the Pythons given that has distmon and what its eye
needs (its relay imports them: a checkout in the working directory has distmon, not its
dependencies) runs the eye; else it says, Python by Python, the first module each lacks (``-``:
that Python is not there; ``!``: it fails importing distmon otherwise)."""


def _tried(pythons: list[str], lacks: object) -> str:
    """The Pythons a node's script tried, each with what it lacked there."""
    said = str(lacks).split() if isinstance(lacks, str) else []
    if len(said) != len(pythons):
        return f"tried {', '.join(pythons)}"
    why = [{"-": "not there", "!": "distmon fails to import"}.get(m, f"no {m}") for m in said]
    return "tried " + ", ".join(f"{p} ({w})" for p, w in zip(pythons, why, strict=True))


@dataclass
class Node:
    """A node being reached, as this host knows it."""

    host: str
    how: str
    state: str = SILENT
    detail: str = ""
    answer: dict[str, object] = field(default_factory=dict)
    """What its eye said, once it answered."""
    told: tuple[str, str] | None = None
    """Its (state, detail) as last handed over."""

    @property
    def jobs(self) -> dict[str, dict[str, object]]:
        jobs = self.answer.get("jobs")
        return {k: v for k, v in jobs.items() if isinstance(v, dict)} if isinstance(jobs, dict) else {}


@dataclass
class _Started:
    """One ssh or srun process and the nodes it reaches."""

    process: subprocess.Popen[bytes]
    nodes: list[str]
    how: str
    err: list[str] = field(default_factory=list)
    out: bytes = b""
    open: int = 2
    """Its output pipes not yet read to their end: what it said is all read once none is."""


class Eyes:
    """The eyes started on other nodes for one command, reporting to ``port`` with ``key``."""

    def __init__(
        self, port: int, key: keys.JobKey, job: str | None, pythons: Sequence[str], lifeline: float | None = None
    ) -> None:
        self.port = port
        self.lifeline = lifeline
        """Seconds each eye waits for this host once it is gone (the eye's own default: None)."""
        self.key = key
        self.job = job
        self.pythons = list(dict.fromkeys(pythons))
        self.nodes: dict[str, Node] = {}
        self._started: list[_Started] = []
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name="distmon-reach", daemon=True)
        self._thread.start()

    def over_ssh(self, hosts: Sequence[str]) -> None:
        """Start an eye on each of ``hosts`` (not yet reached) over ssh, all at once."""
        _room_for(len(self._started) + len(hosts))
        ssh = shlex.split(os.environ.get(SSH_ENV) or "ssh")
        remote = " ".join(shlex.quote(word) for word in ["sh", "-c", SCRIPT, "sh", *self.pythons])
        options = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "ServerAliveInterval=5"]
        for host in hosts:
            if host not in self.nodes:
                self._start([*ssh, *options, "-T", host, remote], [host], SSH)

    def over_slurm(self, job: str, hosts: Sequence[str]) -> None:
        """Start an eye on each of ``hosts``, the nodes of Slurm job ``job``, as one step of it
        (``srun --overlap``: it shares the job's resources, and needs no ssh)."""
        hosts = [h for h in hosts if h not in self.nodes]
        if not hosts:
            return
        argv = ["srun", "--overlap", "--jobid", job, "--nodes", str(len(hosts)), "--ntasks", str(len(hosts))]
        argv += ["--ntasks-per-node", "1", "--nodelist", ",".join(hosts), "--kill-on-bad-exit=0", "--quiet"]
        self._start([*argv, "sh", "-c", SCRIPT, "sh", *self.pythons], hosts, SLURM)

    def _start(self, argv: list[str], hosts: list[str], how: str) -> None:
        orders = {"key": keys.content_of(self.key), "port": self.port, "job": self.job, "version": distmon.__version__}
        if self.lifeline is not None:
            orders["lifeline"] = self.lifeline
        with self._lock:
            for host in hosts:
                self.nodes[host] = Node(host, how)
            try:
                process = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
                )
            except OSError as e:
                for host in hosts:
                    self._fared(host, UNREACHABLE, f"cannot run {argv[0]}: {e.strerror}")
                return
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            with contextlib.suppress(OSError):
                process.stdin.write(json.dumps(orders).encode() + b"\n")
                process.stdin.flush()
            started = _Started(process, hosts, how)
            self._started.append(started)
            os.set_blocking(process.stdout.fileno(), False)
            os.set_blocking(process.stderr.fileno(), False)
            self._selector.register(process.stdout, selectors.EVENT_READ, (started, "out"))
            self._selector.register(process.stderr, selectors.EVENT_READ, (started, "err"))

    def wait(self, timeout: float = ANSWER_WAIT) -> None:
        """Until every node has answered or failed, or ``timeout`` seconds; those still silent
        then are said so."""
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            with self._lock:
                if all(node.state != SILENT for node in self.nodes.values()):
                    return
            time.sleep(0.05)
        with self._lock:
            for node in self.nodes.values():
                if node.state == SILENT and not node.detail:
                    node.detail = f"did not answer within {timeout:.0f}s"

    def news(self) -> list[Reached]:
        """How the nodes fared, where it changed since last asked."""
        with self._lock:
            changed = [n for n in self.nodes.values() if n.told != (n.state, n.detail)]
            for n in changed:
                n.told = (n.state, n.detail)
            return [Reached(n.host, n.how, n.state, n.detail, self._ranks(n)) for n in changed]

    def _ranks(self, node: Node) -> tuple[int, ...]:
        """The ranks of the job followed its eye said it found on ``node`` (of the one job found
        there, where none is named yet)."""
        jobs = node.jobs
        facts = jobs.get(self.job) if self.job is not None else next(iter(jobs.values())) if len(jobs) == 1 else None
        ranks = facts.get("ranks") if facts is not None else None
        if not isinstance(ranks, list):
            return ()
        return tuple(r for r in ranks[:MAX_FOUND] if type(r) is int and 0 <= r < MAX_JOB)

    def close(self) -> None:
        """Tell every eye to end (their inputs closed), then end what is left here."""
        with self._lock:
            started = list(self._started)
        for s in started:
            with contextlib.suppress(OSError):
                assert s.process.stdin is not None
                s.process.stdin.close()
            if s.how == SLURM:
                with contextlib.suppress(OSError):
                    s.process.terminate()  # srun cancels its step's tasks
        until = time.monotonic() + CLOSE_WAIT
        for s in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.process.wait(max(0.0, until - time.monotonic()))
            if s.process.poll() is None:
                s.process.kill()
                s.process.wait()
        self._closed.set()
        self._thread.join(timeout=2)
        self._selector.close()

    def _read(self) -> None:
        """Read every eye's answer and every ssh's or srun's complaint as they come."""
        while not self._closed.is_set():
            try:
                events = self._selector.select(timeout=0.1)
            except (OSError, ValueError, RuntimeError):  # closed under us
                return
            for key, _ in events:
                started, which = key.data
                try:
                    data = os.read(key.fd, MAX_LINE)
                except OSError:
                    data = b""
                if not data:
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(key.fileobj)
                    with self._lock:
                        started.open -= 1
                    continue
                with self._lock:
                    if which == "out":
                        self._heard(started, data)
                    else:
                        lines = data.decode(errors="replace").splitlines()
                        started.err = (started.err + [line for line in lines if line.strip()])[-8:]
            self._ended()

    def _heard(self, started: _Started, data: bytes) -> None:
        started.out = (started.out + data)[-MAX_LINE:]
        *lines, started.out = started.out.split(b"\n")
        for line in lines:
            with contextlib.suppress(ValueError):
                answer = json.loads(line)
                if isinstance(answer, dict):
                    self._answered(started, answer)

    def _answered(self, started: _Started, answer: dict[str, object]) -> None:
        """An eye's line: which node it is (by its host name; one ssh reaches one node, whatever
        that node calls itself), and how it is there."""
        name = answer.get("host")
        host = started.nodes[0] if started.how == SSH else _node_named(started.nodes, name)
        if host is None or host not in self.nodes:
            return
        node = self.nodes[host]
        node.answer = answer
        refused = answer.get("refused")
        if refused == "no_distmon":
            self._fared(host, NO_DISTMON, _tried(self.pythons, answer.get("lacks")))
        elif refused == "other_version":
            self._fared(host, OTHER_VERSION, f"it runs distmon {answer.get('version')}, this is {distmon.__version__}")
        elif refused is not None:
            self._fared(host, REFUSED, str(refused))
        elif answer.get("pyspy") is False:
            self._fared(host, NO_PYSPY, "py-spy is not installed in its Python")
        else:
            self._fared(host, SEEN, "")

    def _ended(self) -> None:
        """Nodes whose ssh or srun ended: unreached where they never answered, else ended."""
        with self._lock:
            for started in self._started:
                code = started.process.poll()
                if code is None or started.open:
                    continue
                said = started.err[-1] if started.err else f"exit code {code}"
                for host in started.nodes:
                    node = self.nodes[host]
                    if node.state == SILENT:
                        state = NO_DISTMON if code == MISSING else UNREACHABLE
                        self._fared(host, state, said if state == UNREACHABLE else f"tried {', '.join(self.pythons)}")
                    elif node.state in (SEEN, NO_PYSPY) and not self._closed.is_set():
                        self._fared(host, ENDED, said)

    def _fared(self, host: str, state: str, detail: str) -> None:
        node = self.nodes[host]
        node.state, node.detail = state, visible(detail)[:MAX_DETAIL]


def _room_for(processes: int) -> None:
    """Let this process hold the pipes of ``processes`` ssh connections at once (three each), as
    far as its hard limit allows: the usual soft limit, 1024 files, holds about 300 nodes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 3 * processes + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(
                resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
            )


def _node_named(hosts: list[str], name: object) -> str | None:
    """Which of ``hosts`` (as Slurm names them) an eye that calls itself ``name`` is."""
    if not isinstance(name, str):
        return None
    short = name.partition(".")[0]
    return next((h for h in hosts if h == name or h.partition(".")[0] == short), None)
