"""NCCL's own lines (``NCCL_DEBUG=INFO`` or ``WARN``): which host each communicator's ranks are
on, how many ranks it has, how many processes print them (each a rank's), and the errors that
mean the program used NCCL wrongly.

    node1:180457:182538 [0] NCCL INFO comm 0x55f7096ee250 rank 0 nranks 8 cudaDev 0 ... - Init COMPLETE
    node1:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000
    ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
    gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error

A host names a node; a communicator's ``rank`` is its own, the global rank only in the largest
communicator of the log (the world's). ``invalid usage`` (two ranks on one GPU, a communicator
used after it was aborted, arguments no two ranks agree on) and CUDA's ``invalid device
ordinal`` (more ranks on a node than it has GPUs) are the program's or its launch's doing, not
a rank's: no rank is to blame for them. A failure of the NVLS transport (``transport/nvls.cc``:
NVLink SHARP, multicast through the node's NVSwitches, which the Fabric Manager runs) is the
node's NVLink fabric's. Any ``NCCL WARN`` line is a job's line, whatever it warns of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_GROUP = 1 << 20
"""Ranks a communicator or a process group may have: more is no real job's."""
MAX_HOSTS = 65536

_PREFIX = re.compile(r"^([\w.-]{1,200}):(\d{1,12}):\d{1,12} \[\d{1,4}\] NCCL (?:INFO|WARN)")
_NRANKS = re.compile(r"NCCL INFO .{0,300}?\bn[Rr]anks (\d{1,9})")
_MEMBER = re.compile(r"\bcomm 0x[0-9a-fA-F]{1,16} rank (\d{1,9}) n[Rr]anks (\d{1,9})")
_DUPLICATE = re.compile(r"Duplicate GPU detected : rank (\d{1,9}) and rank (\d{1,9}) both on CUDA device (\w{1,40})")
_NVLS = re.compile(r"transport/nvls\.cc:\d{1,6} NCCL WARN (.{1,300})")
_MISUSE = re.compile(
    r"ncclInvalidUsage|ncclInvalidArgument|NCCL error.{0,300}?, invalid (?:usage|argument)|invalid device ordinal"
)


@dataclass
class NcclLines:
    """What NCCL's lines of a log say: communicators' sizes and members' hosts, and misuse."""

    nranks: int | None = None
    """The most ranks a communicator of the log has."""
    hosts: dict[int, dict[str, set[int]]] = field(default_factory=dict)
    """Per communicator size, each host's ranks in communicators of that size."""
    duplicate: str | None = None
    """Two ranks on one GPU, as NCCL says it."""
    invalid: str | None = None
    """The first line saying NCCL was used wrongly (``ncclInvalidUsage``, ``invalid argument``)."""
    nvls: str | None = None
    """The first failure of NCCL's NVLS transport, in its words."""
    processes: set[tuple[str, str]] = field(default_factory=set)
    """The processes NCCL's lines come from (host, pid): each a rank's."""

    @property
    def misuse(self) -> str | None:
        """How the program used NCCL wrongly, in the most telling words the log has."""
        return self.duplicate or self.invalid

    def line(self, line: str) -> bool:
        """Reads what ``line`` says, if NCCL wrote it or quoted it in an error."""
        found = "NCCL WARN" in line
        if (found or "NCCL INFO" in line) and len(self.processes) < MAX_HOSTS and (prefix := _PREFIX.match(line)):
            self.processes.add((visible(prefix.group(1), 200), prefix.group(2)))
            found = True
        if found and self.nvls is None and (nvls := _NVLS.search(line)):
            self.nvls = visible(nvls.group(1).strip(), 200)
        if "NCCL INFO" in line and (nranks := _NRANKS.search(line)) and int(nranks.group(1)) <= MAX_GROUP:
            self.nranks = max(self.nranks or 0, int(nranks.group(1)))
            self._member(line)
            found = True
        if "Duplicate GPU" in line and self.duplicate is None and (duplicate := _DUPLICATE.search(line)):
            a, b = sorted(duplicate.groups()[:2], key=int)
            self.duplicate = f"ranks {a} and {b} both on CUDA device {visible(duplicate.group(3), 40)}"
            found = True
        elif "nvalid" in line and self.invalid is None and _MISUSE.search(line):
            self.invalid = visible(line.strip(), 200)
            found = True
        return found

    def _member(self, line: str) -> None:
        prefix, member = _PREFIX.match(line), _MEMBER.search(line)
        if prefix is None or member is None:
            return
        rank, size = int(member.group(1)), int(member.group(2))
        hosts = self.hosts.setdefault(size, {})
        if rank < size and (prefix.group(1) in hosts or len(hosts) < MAX_HOSTS):
            hosts.setdefault(visible(prefix.group(1), 200), set()).add(rank)

    def ranks_on(self, host: str) -> list[int]:
        """The global ranks on ``host`` (a host name or its first label), as the largest
        communicator's lines place them."""
        if not self.hosts:
            return []
        placed = self.hosts[max(self.hosts)]
        short = host.split(".")[0]
        return sorted({r for h, ranks in placed.items() if h.split(".")[0] == short for r in ranks})
