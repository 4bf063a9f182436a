"""The hosts a job runs on, as one of its nodes can tell: what its launcher wrote down (Slurm's
node list in a rank's environment; ``mpirun``'s hosts on its command line, in its hostfile or
rankfile) and who its store hears from (every rank of a torch job connects to the store at
``MASTER_ADDR:MASTER_PORT``: on the store's host, its connections name every node; elsewhere,
``MASTER_ADDR`` names one).

``distmon look`` started on one node of a job reaches the others with these, and each node it
reaches tells the hosts it knows in turn (:mod:`distmon.commands.eye`). Only what names the
job's own hosts is read: a rank's other connections (a metrics upload, a file system) are none
of the job's nodes. Hosts are said as the launcher wrote them (a name) or as the store saw them
(an address, with the name the node's resolver gives it, where it gives one).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import threading
from collections.abc import Callable, Iterable, Sequence

import psutil

MAX_HOSTS = 16_384
"""Hosts one list names at most: what a job's launcher or store says beyond that is not read."""
MAX_FILE = 1 << 20
"""Bytes of a hostfile or rankfile read at most."""
MAX_RANGE = 65_536
"""Numbers one bracketed range of a Slurm host list may stand for at most."""
HOST_OPTIONS = {"-H", "--host", "-host", "--hosts"}
FILE_OPTIONS = {"--hostfile", "-hostfile", "--machinefile", "-machinefile", "--default-hostfile", "-default-hostfile"}
RANKFILE_OPTIONS = {"--rankfile", "-rankfile", "-rf"}
MPI_LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun", "prterun", "prun", "mpirun.openmpi", "mpiexec.openmpi"})
"""Open MPI's launchers, by their executable's name."""
_NAME = re.compile(r"^[A-Za-z0-9_.:\-\[\]]+$")


def hostlist(text: str) -> list[str]:
    """Slurm's host list expanded: ``node[01-03,7],gpu-a`` is node01, node02, node03, node7,
    gpu-a (zero padding kept); at most :data:`MAX_HOSTS`. Raises ValueError for a list Slurm
    would not write."""
    hosts: list[str] = []
    for part in _split_top(text.strip()):
        if not part:
            continue
        hosts.extend(_expand(part))
        if len(hosts) >= MAX_HOSTS:
            return hosts[:MAX_HOSTS]
    return hosts


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {text!r}")
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    return parts


def _expand(part: str) -> list[str]:
    """One host pattern, its first bracket expanded and the rest after it in turn."""
    head, bracket, rest = part.partition("[")
    if not bracket:
        if not _NAME.match(part):
            raise ValueError(f"not a host name: {part!r}")
        return [part]
    inside, _, tail = rest.partition("]")
    numbers: list[str] = []
    for item in inside.split(","):
        first, dash, last = item.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"not a range of numbers: [{inside}]")
        low, high = int(first), int(last) if dash else int(first)
        if high < low or high - low >= MAX_RANGE:
            raise ValueError(f"not a range Slurm writes: [{inside}]")
        width = len(first) if first.startswith("0") else 0
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
        if len(numbers) > MAX_HOSTS:
            break
    tails = _expand(tail) if tail else [""]
    return [f"{head}{n}{t}" for n in numbers[:MAX_HOSTS] for t in tails][:MAX_HOSTS]


def hostfile_hosts(text: str) -> list[str]:
    """The hosts of an Open MPI or MPICH hostfile (``node-a slots=2``, ``node-b:4``), or of a
    plain list of hosts, one a line; ``#`` comments and blank lines skipped."""
    hosts = []
    for line in text.splitlines():
        word = line.partition("#")[0].split()
        if word:
            hosts.append(word[0].partition(":")[0])
    return _unique(hosts)


def rankfile_hosts(text: str) -> list[str]:
    """The hosts of an Open MPI rankfile (``rank 0=node-a slot=0``)."""
    hosts = []
    for line in text.splitlines():
        _, equals, after = line.partition("#")[0].partition("=")
        if equals and after.split():
            hosts.append(after.split()[0])
    return _unique(hosts)


def mpirun_hosts(argv: Sequence[str], read: Callable[[str], str]) -> list[str]:
    """The hosts an ``mpirun`` command line names: ``--host a:2,b:2``, a hostfile, a rankfile
    (files read with ``read``, relative to where it runs; unreadable files name none)."""
    hosts: list[str] = []
    args = list(argv[1:])
    for i, arg in enumerate(args):
        option, equals, value = arg.partition("=")
        if not equals:
            value = args[i + 1] if i + 1 < len(args) else ""
        if option in HOST_OPTIONS:
            hosts.extend(h.partition(":")[0] for h in value.split(",") if h)
        elif option in FILE_OPTIONS:
            hosts.extend(hostfile_hosts(read(value)))
        elif option in RANKFILE_OPTIONS:
            hosts.extend(rankfile_hosts(read(value)))
        if not arg.startswith("-") and i and not args[i - 1].startswith("-"):
            break  # the program and its own arguments
    return _unique(hosts)


def is_mpirun(argv: Sequence[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) in MPI_LAUNCHERS


def store_peers(port: int) -> list[str]:
    """The addresses of the hosts connected to the store this host serves on ``port`` (a
    torch job's ``MASTER_PORT``, or its rendezvous's): empty where no process of ours listens
    there."""
    peers: list[str] = []
    with contextlib.suppress(psutil.Error, OSError):
        connections = psutil.net_connections("tcp")
        serving = any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections)
        if serving:
            for c in connections:
                if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port and c.raddr:
                    peers.append(_plain(c.raddr.ip))
    own = own_addresses()
    return _unique(p for p in peers if p not in own)


def own_addresses() -> set[str]:
    """This host's addresses, loopback included."""
    addresses = {"127.0.0.1", "::1", "localhost"}
    with contextlib.suppress(OSError):
        for entries in psutil.net_if_addrs().values():
            addresses.update(_plain(e.address.partition("%")[0]) for e in entries if e.family in _INET)
    return addresses


def is_here(host: str) -> bool:
    """Whether ``host`` names this host: its name, or one of its addresses."""
    short = socket.gethostname().partition(".")[0]
    return host.partition(".")[0] == short or _plain(host) in own_addresses()


def named(address: str, timeout: float = 1.0) -> str:
    """The name this host's resolver gives ``address`` (its hosts file, DNS), else the address."""
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return address
    result: list[str] = []

    def lookup() -> None:
        with contextlib.suppress(OSError):
            result.append(socket.gethostbyaddr(address)[0])

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(timeout)
    return result[0] if result else address


_INET = (socket.AF_INET, socket.AF_INET6)


def _plain(address: str) -> str:
    """An IPv4 address mapped into IPv6 (``::ffff:10.0.0.2``) as itself."""
    return address.removeprefix("::ffff:") if "." in address else address


def _unique(hosts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(h for h in hosts if h))[:MAX_HOSTS]
