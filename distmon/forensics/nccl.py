"""NCCL's own lines (``NCCL_DEBUG=INFO`` or ``WARN``): which host each communicator's ranks are
on, how many ranks it has, how many processes print them (each a rank's), and the errors that
mean the program used NCCL wrongly.

    node1:180457:182538 [0] NCCL INFO comm 0x55f7096ee250 rank 0 nranks 8 cudaDev 0 ... - Init COMPLETE
    node1:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000
    ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
    gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error
    node2:811:811 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<40393> failed : No
        route to host
    node2:811:811 [0] NCCL WARN Bootstrap : no socket interface found
    node3:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error
    node3:815:864 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error    (2.23+)

A host names a node; a communicator's ``rank`` is its own, the global rank only in the largest
communicator of the log (the world's). ``invalid usage`` (two ranks on one GPU, a communicator used
after it was aborted, arguments no two ranks agree on) and CUDA's ``invalid device ordinal`` (more
ranks on a node than it has GPUs; torch's ``device < num_gpus`` check) are the program's or its
launch's doing, not a rank's: no rank is to blame for them. A failure of the NVLS transport
(``transport/nvls.cc``: NVLink SHARP, multicast through the node's NVSwitches, which the Fabric
Manager runs) is the node's NVLink fabric's. A socket NCCL could not connect (``Connect to ...
failed``, 2.7-2.12 and ``socketStartConnect:`` since), or no interface to bootstrap on, is the
network's set-up between the processes (the interface NCCL picks, a firewall, a route), not a rank.
An InfiniBand adapter's fatal async event (the device's ``local catastrophic error``, a queue pair's
or a completion queue's fatal error: ``net_ib``'s async thread reads them from the driver) is that
node's adapter failing, not a rank, as is its port going down (``port error``: the link lost); its other
events (a port coming up, the GID table) are no failure.
A process's rank is the one its own set-up lines give it (its ``comm ... rank N`` line, the
connections it sets up: ``Channel 00 : 2[...] -> 0[...]``), where they give one: the rank whose GPU
NCCL then finds ``out of memory`` is suspected (that CUDA refused NCCL's call for the set-up's
reasons is read by :mod:`~distmon.forensics.environment`). Any ``NCCL WARN`` line is a job's line,
whatever it warns of."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_GROUP = 1 << 20
"""Ranks a communicator or a process group may have: more is no real job's."""
MAX_HOSTS = 65536

_PREFIX = re.compile(
    r"^([\w.-]{1,200}):(\d{1,12}):\d{1,12} \[(\d{1,4})\] (?:[\w/.-]{1,200}:\d{1,6} )?(?:NCCL )?(INFO|WARN)\b"
)
"""A line of NCCL's: its process (host, pid, thread), its device, the source line of a WARN (2.12+; 2.4
and 2.5's before a WARN not yet named NCCL's: ``node1:42:57 [1] include/socket.h:194 WARN ...``)."""
_TESTS_RANK = re.compile(
    r"#\s{1,8}Rank\s{1,8}(\d{1,9})\s{1,8}(?:Group\s{1,8}\d{1,9}\s{1,8})?(?:Pid\s{1,8}(\d{1,12})\s{1,8})?on\s{1,8}"
    r"([\w.-]{1,200})\s{1,8}device\s{1,8}(\d{1,4})"
)
"""nccl-tests' table of its ranks (``#  Rank  0 Group  0 Pid   4242 on node1 device  0 [0x07] ...``); the
tests of NCCL 1 ran in one process and print no pid (``#   Rank  0 on  node03 device  0 [0x00] ...``)."""
_RETURNED = re.compile(r"\bINFO ([\w/.-]{1,200}\.(?:cc|cu|cpp|h)):\d{1,6} -> (\d{1,2})\b")
"""NCCL's trace of a call that failed, each caller on its way out (``transport/net.cc:515 -> 2``)."""
RESULTS = {2: "ncclSystemError", 3: "ncclInternalError"}
"""The results of NCCL's calls that its connections' set-up or transport returns (a system call, its
own state): not a rank's program (its CUDA and usage errors are read where said). A peer gone
(``ncclRemoteError``, 6) is left out: that is a peer's end, read as a lost peer."""
_RESULT = re.compile(
    r"unhandled system error|internal error(?:, NCCL version| - please report this issue to the NCCL developers)"
    r"|ncclSystemError|ncclInternalError"
)
"""Those results as torch's error quotes them (``NCCL error in: ..., unhandled system error``), a peer gone
(``ncclRemoteError``) left out: that is a peer's end, read as a lost peer."""
_ADDRESS = re.compile(
    r"(?:Bootstrap ?: Using|NET/Socket ?: Using \[\d{1,3}\]|OOB) ?[\w.-]{1,64}:(\d{1,3}(?:\.\d{1,3}){3})<"
)
"""The address NCCL's process bootstraps or sends on (``Bootstrap : Using eth0:10.4.2.17<0>``, ``NET/Socket :
Using [0]eth0:...``, ``NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:...``): where a peer lost by address is."""
_VERSIONS = re.compile(
    r"Mismatched NCCL version detected : rank (\d{1,9}) version (\d{4,6}) rank (\d{1,9}) version (\d{4,6})"
)
"""NCCL as its ranks meet (``init.cc``): two ranks of one communicator built against other NCCLs."""
_CUDA_DEV = re.compile(r" cudaDev (\d{1,4})\b")
"""The device a communicator's line names (``comm 0x... rank 5 nranks 8 cudaDev 5 ...``): a thread that aborts
it (torch's watchdog) may print another in its prefix, the device current on that thread."""
MISUSED = (
    "the program or its launch used NCCL or the GPUs wrongly (its device assignment, a communicator used after "
    "it failed, arguments the ranks do not agree on), not a rank"
)
MAX_DEVICES = 64
"""Devices kept of one process."""
_NRANKS = re.compile(r"NCCL INFO .{0,300}?\bn[Rr]anks (\d{1,9})")
_MEMBER = re.compile(r"\bcomm 0x[0-9a-fA-F]{1,16} rank (\d{1,9}) n[Rr]anks (\d{1,9})")
_DUPLICATE = re.compile(r"Duplicate GPU detected : rank (\d{1,9}) and rank (\d{1,9}) both on CUDA device (\w{1,40})")
_BUS = re.compile(r"\bbusId (\w{1,16})")
MAX_GPUS = 4096
"""GPUs kept by host and bus id, from NCCL's member lines."""
_NVLS = re.compile(r"transport/nvls\.cc:\d{1,6} NCCL WARN (.{1,300})")
_UNCONNECTED = re.compile(
    r"Connect to ([\w.:%-]{1,200})<\d{1,6}> (?:failed ?: ?|returned \d{1,4}\()([\w ]{1,60})"
    r"|(no socket interface found|with family \d{1,6} is neither AF_INET)"
    r"|socketPollConnect: connect returned ([\w ]{1,60})"
)
"""A socket NCCL could not connect (2.7-2.12's ``Connect to ... failed``, then ``socketStartConnect:``,
2.19's ``socketPollConnect: connect returned Connection refused, exceeded error retry count``), or no
interface to bootstrap on (``no socket interface found``; an address of no family, ``ncclSocketInit: connecting
to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)``, where NCCL_SOCKET_IFNAME names an
interface the host lacks)."""
_RETRY = re.compile(r"Call to connect returned (Connection refused|Connection timed out|No route to host), retrying")
"""NCCL's socket retrying a peer's address (2.8 to 2.18, at INFO) as it sets a communicator up."""
RETRIED_AT_LEAST = 3
"""Retries with no communicator set up after them that make a connection never made, not a peer still starting."""
_ASYNC = re.compile(
    r"NET/IB ?: (?:([\w.-]{1,64}):\d{1,4} )?"
    r"(?:Got async event ?: ?|async fatal event(?: on (?:CQ|QP|SRQ)[^:]{0,300})?: ?)(.{1,120})"
)
"""``net_ib``'s async thread on an event of the adapter (its name and port since NCCL 2.21): a fatal one
said as such since 2.23, before then by its name."""
_FATAL_EVENTS = re.compile(
    r"catastrophic|fatal|CQ error|work queue|access violation|invalid request|^port error", re.IGNORECASE
)
"""The ``ibv_event_type_str`` names of the adapter's fatal events and of its port going down (``port error``:
its link lost), not a port's other states nor the GID table."""
_CHANNEL = re.compile(r"NCCL INFO Channel \d{1,3}(?:/\d{1,3})? ?: (\d{1,9})\[\w{1,20}\] -> \d{1,9}\[")
"""A connection NCCL sets up (``Channel 00 : 0[1020] -> 2[1040] via SHM/direct/direct``): each transport's
send set-up prints it, so its first rank is the printing process's own in that communicator."""
_OUT_OF_MEMORY = re.compile(r"NCCL WARN Cuda failure (?:\d{1,4} )?'out of memory'")
"""A CUDA allocation or launch of NCCL's that found the process's GPU out of memory."""
_MISUSE = re.compile(
    r"ncclInvalidUsage|ncclInvalidArgument|NCCL error.{0,300}?, invalid (?:usage|argument)|invalid device ordinal"
    r"|device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"
)
"""NCCL's word on its misuse, and CUDA's (torch's own check in ``CUDAContext.cpp`` since 2.x) on a device
index past the GPUs the process sees."""


@dataclass
class NcclLines:
    """What NCCL's lines of a log say: communicators' sizes and members' hosts, and misuse."""

    nranks: int | None = None
    """The most ranks a communicator of the log has."""
    hosts: dict[int, dict[str, set[int]]] = field(default_factory=dict)
    """Per communicator size, each host's ranks in communicators of that size."""
    duplicate: str | None = None
    """Two ranks on one GPU, as NCCL says it."""
    shared: str | None = None
    """Two ranks on one GPU, as NCCL's member lines show it (where the job was not launched twice)."""
    gpus: dict[tuple[str, str], tuple[str, int, int]] = field(default_factory=dict)
    """Per GPU (host, bus id), the first process (pid), rank and communicator size NCCL's member lines put on it."""
    members: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)
    """Per communicator size and rank, the first process (host, pid) its member lines show."""
    relaunched: bool = False
    """A rank of a communicator of one size shown in two processes: the job ran twice (a restart), or it
    has several communicators of that size; either way two ranks on one GPU may not be one launch's."""
    invalid: str | None = None
    """The first line saying NCCL was used wrongly (``ncclInvalidUsage``, ``invalid argument``)."""
    nvls: str | None = None
    """The first failure of NCCL's NVLS transport, in its words."""
    unconnected: str | None = None
    """The first socket NCCL could not connect, or its bootstrap's want of an interface, in words."""
    retries: int = 0
    """NCCL's retries of a connection refused or timed out since its last communicator's set-up completed."""
    retried: str | None = None
    """Why the last of them was retried, in NCCL's words."""
    processes: set[tuple[str, str]] = field(default_factory=set)
    """The processes NCCL's lines come from (host, pid): each a rank's."""
    adapter: str | None = None
    """The first fatal event of an InfiniBand adapter, in words."""
    _port_down: str | None = None
    """Where the port whose going down :attr:`adapter` says is (its device, its host)."""
    devices: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    """Per process (host, pid), the GPUs NCCL's lines, or nccl-tests' table, show it driving."""
    returned: str | None = None
    """The first of NCCL's calls that failed in its set-up or transport, in words (its result, its file)."""
    result: str | None = None
    """The first such result an error quotes, where NCCL's trace is not in the log."""
    own: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    """Per process (host, pid), the ranks its own lines give it in a communicator (its member line, the
    connections it sets up)."""
    shm: bool = False
    """A connection NCCL set up goes through the node's shared memory (``via SHM/direct/direct``, ``via direct shared
    memory`` before 2.8)."""
    versions: str | None = None
    """Where two ranks' NCCL versions differ, in words."""
    addresses: dict[str, str] = field(default_factory=dict)
    """Per IPv4 address, the host NCCL's lines show using it."""
    starved: set[tuple[str, str]] = field(default_factory=set)
    """The processes whose GPU NCCL found out of memory (two at most kept: more say the same)."""

    def _event(self, line: str, event: re.Match[str]) -> None:
        """An adapter's event: the first fatal one, or its port gone down, unless that port came up
        again since (a link that flapped and recovered failed nothing)."""
        said, device = event.group(2).strip(), event.group(1)
        host = prefix.group(1) if (prefix := _PREFIX.match(line)) else None
        where = " on ".join(visible(w, 200) for w in (device, host) if w)
        if self.adapter is None and ("fatal event" in line or _FATAL_EVENTS.search(said)):
            self.adapter = f"{visible(said, 120)}" + (f" ({where})" if where else "")
            self._port_down = where if said.startswith("port error") else None
        elif self._port_down == where and said.startswith("port active"):
            self.adapter = self._port_down = None

    def misused(self) -> str | None:
        """Why no rank is to blame where the ranks' NCCLs differ (which NCCL calls an invalid usage too), or the
        program used NCCL wrongly, in the most telling words the log has."""
        misuse = self.duplicate or (None if self.relaunched else self.shared) or self.invalid
        return self.versions or (f"{MISUSED}: {misuse}" if misuse else None)

    def line(self, line: str) -> bool:
        """Reads what ``line`` says, if NCCL wrote it or quoted it in an error."""
        prefix = _PREFIX.match(line) if "INFO" in line or "WARN" in line else None
        found = "NCCL WARN" in line or (prefix is not None and prefix.group(4) == "WARN")
        if prefix is not None and len(self.processes) < MAX_HOSTS:
            process = (visible(prefix.group(1), 200), prefix.group(2))
            self.processes.add(process)
            device = _CUDA_DEV.search(line)  # a communicator's own device, whichever the thread's prefix shows
            self._drives(process, int(device.group(1) if device else prefix.group(3)))
            self._owns(process, line)
            found = True
            if "Using" in line or "OOB" in line:
                address = _ADDRESS.search(line)
                if address is not None and len(self.addresses) < MAX_HOSTS:
                    self.addresses[address.group(1)] = process[0]
        if "Rank" in line and (tests := _TESTS_RANK.search(line)) is not None and len(self.processes) < MAX_HOSTS:
            process = (visible(tests.group(3), 200), tests.group(2) or "")
            self.processes.add(process)
            self._drives(process, int(tests.group(4)))
            found = True
        if "Mismatched NCCL" in line and self.versions is None and (versions := _VERSIONS.search(line)) is not None:
            one, its, other, theirs = (int(n) for n in versions.groups())
            self.versions = (
                f"the ranks run different NCCL versions (rank {one} NCCL {_version(its)}, rank {other} NCCL "
                f"{_version(theirs)}): "
                "install one NCCL build on every node (the same torch wheel or nvidia-nccl package, the same "
                "container image), not a rank"
            )
            found = True
        named = prefix is not None or "NCCL INFO" in line
        if "->" in line and named and self.returned is None and (returned := _RETURNED.search(line)) is not None:
            result = RESULTS.get(int(returned.group(2)))
            if result is not None:
                self.returned = f"{result} in {visible(returned.group(1), 200)}"
            found = True
        if self.result is None and "rror" in line and (quoted := _RESULT.search(line)) is not None:
            self.result = quoted.group(0)
            found = True
        if found and self.nvls is None and (nvls := _NVLS.search(line)):
            self.nvls = visible(nvls.group(1).strip(), 200)
        if found and "async" in line and (event := _ASYNC.search(line)) is not None:
            self._event(line, event)
        connecting = self.unconnected is None and ("onnect" in line or "interface found" in line)
        if connecting and (failed := _UNCONNECTED.search(line)) is not None:
            peer, why, bootstrap, polled = failed.groups()
            where = f" to {visible(peer, 200)}" if peer else ""
            if bootstrap is not None and not bootstrap.startswith("no socket"):
                bootstrap = "NCCL found no address to bootstrap on (an interface the host lacks)"
            self.unconnected = bootstrap or f"NCCL could not connect{where} ({(why or polled).strip()})"
            found = True
        if "retrying" in line and (retry := _RETRY.search(line)) is not None:
            self.retries, self.retried, found = self.retries + 1, retry.group(1), True
        elif "Init COMPLETE" in line or "Connected all" in line:
            self.retries = 0  # a communicator set up (not one aborted): what was retried before connected in the end
        if "NCCL INFO" in line and (nranks := _NRANKS.search(line)) and int(nranks.group(1)) <= MAX_GROUP:
            self.nranks = max(self.nranks or 0, int(nranks.group(1)))
            self._member(line)
            found = True
        if "Duplicate GPU" in line and self.duplicate is None and (duplicate := _DUPLICATE.search(line)):
            a, b = sorted(duplicate.groups()[:2], key=int)
            self.duplicate = f"ranks {a} and {b} both on CUDA device {visible(duplicate.group(3), 40)}"
            found = True
        elif ("nvalid" in line or "num_gpus" in line) and self.invalid is None and _MISUSE.search(line):
            self.invalid = visible(line.strip(), 200)
            found = True
        return found

    def _owns(self, process: tuple[str, str], line: str) -> None:
        """The process's rank, where its line says it (its member line, a connection it sets up), or
        that NCCL found its GPU out of memory."""
        if "out of memory" in line and len(self.starved) < 2 and _OUT_OF_MEMORY.search(line):
            self.starved.add(process)
        self.shm = self.shm or (("via SHM" in line or "via direct shared" in line) and bool(_CHANNEL.search(line)))
        mine = _CHANNEL.search(line) if "Channel" in line else _MEMBER.search(line) if "comm" in line else None
        if mine is not None and len(held := self.own.setdefault(process, set())) < MAX_DEVICES:
            held.add(int(mine.group(1)))

    def out_of_memory(self) -> tuple[int, str] | None:
        """The rank whose GPU NCCL found out of memory, one process's alone, where that process's own lines
        give it one rank (one communicator's set-up: the world's where the log shows no other), with its
        host and pid."""
        if len(self.starved) != 1:
            return None
        [(host, pid)] = self.starved
        ranks = self.own.get((host, pid), set())
        return (next(iter(ranks)), f"process {pid} on {host}") if len(ranks) == 1 else None

    def _drives(self, process: tuple[str, str], device: int) -> None:
        held = self.devices.setdefault(process, set())
        if len(held) < MAX_DEVICES:
            held.add(device)

    def one_process(self) -> str | None:
        """Where every line of NCCL's comes from one process driving several GPUs (nccl-tests' ``-g 4``,
        a process of one rank a GPU for each of its threads): that process, in words."""
        if len(self.processes) != 1:
            return None
        (host, pid), devices = next(iter(self.devices.items()), (("", ""), set()))
        if len(devices) < 2:
            return None
        process = f"process {pid} on {host}" if pid else f"one process on {host}"
        return f"{process}, driving GPUs {', '.join(str(d) for d in sorted(devices))}"

    def _member(self, line: str) -> None:
        prefix, member = _PREFIX.match(line), _MEMBER.search(line)
        if prefix is None or member is None:
            return
        rank, size = int(member.group(1)), int(member.group(2))
        hosts = self.hosts.setdefault(size, {})
        if rank < size and (prefix.group(1) in hosts or len(hosts) < MAX_HOSTS):
            hosts.setdefault(visible(prefix.group(1), 200), set()).add(rank)
        host = visible(prefix.group(1), 200)
        first = self.members.get((size, rank))
        if first is None and len(self.members) < MAX_GPUS:
            self.members[(size, rank)] = (host, prefix.group(2))
        self.relaunched |= first is not None and first != (host, prefix.group(2))
        if (bus := _BUS.search(line)) is not None:
            self._on_gpu((host, bus.group(1)), prefix.group(2), rank, size)

    def _on_gpu(self, gpu: tuple[str, str], pid: str, rank: int, size: int) -> None:
        """Two processes, other ranks of communicators of one size, on one host's one GPU: NCCL's
        duplicate GPU, where its own words are not in the log (unless the job ran twice: a restart may
        put another rank on the GPU)."""
        first = self.gpus.get(gpu)
        if first is None:
            if len(self.gpus) < MAX_GPUS:
                self.gpus[gpu] = (pid, rank, size)
            return
        if self.shared is None and first[0] != pid and first[1] != rank and first[2] == size:
            a, b = sorted((first[1], rank))
            self.shared = f"ranks {a} and {b} both on the GPU of bus id {visible(gpu[1], 16)} on {gpu[0]}"

    def placed(self) -> dict[str, set[int]]:
        """Each host's global ranks, as the largest communicator's lines place them."""
        return self.hosts[max(self.hosts)] if self.hosts else {}

    def never_connected(self) -> str | None:
        """The first socket NCCL could not connect, or the one it went on retrying with no communicator set up after
        (a log that ends so: a paste taken as the job hung there), in words."""
        if self.unconnected is not None or self.retries < RETRIED_AT_LEAST:
            return self.unconnected
        return (
            f"NCCL retried its connection {self.retries} times ({self.retried}) and, as far as the log goes, set no "
            "communicator up"
        )

    def ranks_on(self, host: str) -> list[int]:
        """The global ranks on ``host`` (a host name or its first label, or an address NCCL's lines show a
        host using), as the largest communicator's lines place them."""
        short = self.addresses.get(host, host).split(".")[0]
        return sorted({r for h, ranks in self.placed().items() if h.split(".")[0] == short for r in ranks})


def _version(code: int) -> str:
    """NCCL's version code as its release (22105: 2.21.5; before 2.9, 2703: 2.7.3)."""
    return (
        f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        if code >= 20900
        else f"{code // 1000}.{code // 100 % 10}.{code % 100}"
    )
