"""What c10d's key-value store says of the processes that meet through it: a process that could
not reach it, a group's store-based barrier that counted the wrong number of arrivals, a rank
that waited in it for another (torch's ``socket.cpp``, ``TCPStore.cpp``, ``ProcessGroupNCCL.cpp``'s
communicator set-up, ``distributed_c10d.py``'s ``_store_based_barrier``)::

    [c10d] The client socket has timed out after 900s while trying to connect to (10.0.0.1, 29500).
    RuntimeError: connect() timed out. Original timeout was 60000 ms.             (torch 1.x)
    The server socket has failed to listen on any local network address. ... EADDRINUSE
    RuntimeError: Address already in use                                           (torch 1.x)
    Failed to connect to client mesh master: 10.0.0.2:8477                 (torch_xla's XRT, its rendezvous)
    torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.
    torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed.
    Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1
        (world_size=2, worker_count=3, timeout=0:30:00)
    Timed out initializing process group in store based barrier on rank: 7, for key: store_based_barrier_key:32
        (world_size=8, worker_count=4, timeout=0:00:30)        (2.x: "on rank 7", "num_workers_joined=4")
    [rank1]:[W516 ...socket.cpp:464] [c10d] waitForInput: poll for socket SocketImpl(...) returned 0, likely a timeout
    [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by
        key '0', but store->get('0') got error: Socket Timeout
    torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//0//cuda//0
    RuntimeError: Timeout waiting for key: default_pg/0/0 after 1800000 ms
    [rank4]:[W810 ...TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=102, addr=[n2]:50360,
        remote=[n1]:40027): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote
        server shutdown or crash?
    [rank2]:[W810 ...] [PG ID 0 PG GUID 0 Rank 2] Failed to check the "should dump" flag on TCPStore,
        (maybe TCPStore server has shut down too early), with error: ...

A process that cannot reach the store never joins: nobody is to blame but the set-up (the address
and port it was given, a firewall, the store's host not up); nor is anyone where the store could
not listen on its port, which another process held (another job on MASTER_PORT, a run before
not yet ended). A barrier that counts more arrivals
than the world has met processes of another launch (two jobs on one port, a file store's file
left from a run before): the launch. A rank that timed out waiting in the store waited for another
that had not yet come (the key is set by a rank that has not reached the same call): it is a
victim; the rank it names (the communicator's root), else the rank still working, is the suspect.
A rank whose connection to the store closed lost its server: the process that hosted it (rank 0's,
or torchrun's agent's on its node) ended first, how or why those lines do not say (its crash, its
ordinary end before the others', its launch): the ranks that lost it are not at fault, and the
store's host is where to look, not a rank they prove.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.watchdog import DEFAULT_PG, PG, WORLD_GROUP, pg_prefix
from distmon.guards.text import visible
from distmon.monitor.state.words import rank_word
from distmon.wire import StackFrame

REACH = (
    "the address and port given (MASTER_ADDR and MASTER_PORT, --rdzv-endpoint), a firewall, a node whose launch never "
    "started, another job on the port, or the store's host not up yet"
)
"""What to check where a process could not meet the others through the store."""
MAX_WAITS = 64
"""Store waits kept from one log."""
MAX_COUNT = 1 << 20
"""A barrier's counts beyond this are no real job's."""

_UNREACHABLE = re.compile(
    r"client socket has timed out after (\d{1,9})s while trying to connect to \(([\w.:%-]{1,200})(?:\s?, ?(\d{1,6}))?"
    r"|connect\(\) timed out\. Original timeout was (\d{1,12}) ms"
)
_FAILED_TO_CONNECT = re.compile(
    r"client socket has failed to connect to (?:any network address of \(([\w.:%-]{1,200}), ?(\d{1,6})\)"
    r"|\[([\w.:%-]{1,200})\]:(\d{1,6}))"
)
"""torch 2.x's client that gave up connecting to the store (``... to [node1]:29500 (errno: 111 -
Connection refused)``)."""
_IN_USE = re.compile(r"failed to listen on any local network address|[Aa]ddress already in use")
"""The store's server could not bind its port: another process holds it."""
_MESH = re.compile(r"Failed to connect to client mesh master: ?([\w.:%\[\]-]{1,200})")
"""torch_xla's XRT (``mesh_service.cc``): a process that could not reach the mesh master, its
rendezvous, within ``XRT_MESH_CONNECT_WAIT`` (300 s)."""
SET_UP = re.compile(
    _UNREACHABLE.pattern
    + "|"
    + _FAILED_TO_CONNECT.pattern
    + "|"
    + _IN_USE.pattern
    + "|"
    + _MESH.pattern
    + r"|connection to the C10d store has failed"
)
"""What a process raises when the store's set-up failed: the set-up's words, no fault of its own."""
_CLIENTS = re.compile(r"Timed out after (\d{1,9}) seconds waiting for clients\. (\d{1,9})/(\d{1,9}) clients joined")
"""The store's own host, its server waiting for the processes of the other nodes to connect."""
_RENDEZVOUS = re.compile(r"(RendezvousTimeoutError)|RendezvousConnectionError|connection to the C10d store has failed")
_BARRIER = re.compile(
    r"store based barrier (?:to initialize process group )?(?:for|on) rank:? (\d{1,9}),? (?:for )?key: ?([\w:]{1,200})"
    r" \(world_size=(\d{1,9}), (?:worker_count|num_workers_joined)=(\d{1,9})"
)
_ROOT = re.compile(
    r"\[(\d{1,9})\] is setting up NCCL communicator and retriev\w{1,4} ncclUniqueId from \[(\d{1,9})\] via c10d"
)
WAITED = re.compile(
    r"likely a timeout|wait timeout after \d|Timeout waiting for key|retriev\w{1,4} ncclUniqueId from \[\d"
    r"|store->get\(|Socket Timeout|Timed out receiving the shared seed from the distrib\w{1,8} store"
)
"""What a rank says when its wait in the store for a key another rank sets timed out (the
DataLoader's shared seed, which rank 0 sets, among them)."""
_WORDS = (
    "store",
    "Store",
    "socket",
    "Socket",
    "key",
    "connect()",
    "clients",
    "Rendezvous",
    "in use",
    "mesh master",
    "shared seed",
)
"""Words one of the lines above holds: a line without any is none of them."""
_FIRST = ("main_process_first", "local_main_process_first", "zero_first", "torch_distributed_zero_first")
"""The context managers in which every rank but the main one waits in a barrier while the main one
runs the block first (transformers' and accelerate's ``main_process_first``, ultralytics'
``torch_distributed_zero_first``, axolotl's ``zero_first``)."""
_LOST = re.compile(
    r"failed on SocketImpl\(.{0,200}?remote=\[?([\w.:%-]{1,200}?)\]?:(\d{1,6})\).{0,80}?"
    r"(?:got 0 bytes|[Cc]onnection (?:was likely closed|reset|closed)|[Bb]roken pipe)"
    r"|(TCPStore server has shut down)"
)
"""A rank's connection to the store closed: its server went away."""
_AGENT = ("torch/distributed/run.py", "distributed/elastic/agent/server/", "distributed/launcher/api.py")
"""torchrun's own files: a traceback through them is its agent's, which meets the other nodes'
agents in the store before it starts any worker."""
_DOCKER_BRIDGE = re.compile(r"172\.17\.\d{1,3}\.\d{1,3}$")
"""Docker's default bridge network: an address reachable from its own host only."""


@dataclass(frozen=True)
class StoreWait:
    """A rank's wait in the store that timed out."""

    rank: int | None
    """The waiting rank, where the line says it."""
    awaited: int | None
    """The rank it waited for, where the line names it (the communicator's root)."""
    said: str
    subgroup: bool | None = None
    """It waited for another group's communicator than the world's (its ranks are that group's);
    False, the world's; None, the line does not say."""
    root_at_most: int | None = None
    """The highest rank its group's root may be, where that group's ranks are not the world's."""


@dataclass
class StoreLines:
    """What the store's lines of a log say."""

    unreachable: str | None = None
    """The first process that could not reach the store, in words."""
    check: str | None = None
    """What to check where the rendezvous was not c10d's (torch_xla's mesh master)."""
    counted: tuple[int, int, str] | None = None
    """A store-based barrier's world size and the most arrivals it counted, and its key."""
    barrier_ranks: set[int] = field(default_factory=set)
    """The ranks the store-based barrier's lines show waiting."""
    waits: list[StoreWait] = field(default_factory=list)
    main_first: list[tuple[int | None, str]] = field(default_factory=list)
    """Ranks (None: a traceback no rank prefixes) whose traceback shows them waiting in a barrier
    while the main process ran a block first, and the context's name."""
    lost: set[int | None] = field(default_factory=set)
    """Ranks (None: a line no rank prefixes) whose connection to the store closed."""
    server: str | None = None
    """The store's address, where a line that lost it gives it."""
    agent_waited: bool = False
    """torchrun's agent timed out in the store at its first rendezvous (its own traceback, before it
    started workers or watched them): where the log shows no worker, no rank waited."""

    def line(self, body: str, rank: int | None) -> bool:
        """Reads ``body`` if it is one of the store's lines (``rank``: its prefix's)."""
        if not any(word in body for word in _WORDS):
            return False
        if (found := _UNREACHABLE.search(body)) is not None:
            seconds, host, port, ms = found.groups()
            if self.unreachable is None:
                where = f" at {visible(host, 200)}" + (f":{port}" if port else "") if host else ""
                took = f"{seconds}s" if seconds else f"{int(ms) // 1000}s"
                self.unreachable = f"a process could not reach the c10d store{where} within {took}"
                if host and _DOCKER_BRIDGE.match(host):
                    self.unreachable += (
                        f" ({visible(host, 200)} is on Docker's default bridge: reachable from its own host only)"
                    )
            return True
        if "failed to connect" in body and (failed := _FAILED_TO_CONNECT.search(body)) is not None:
            if self.unreachable is None:
                host, port = (
                    (failed.group(1), failed.group(2)) if failed.group(1) else (failed.group(3), failed.group(4))
                )
                self.unreachable = f"a process could not reach the c10d store at {visible(host, 200)}:{port}"
            return True
        if (mesh := _MESH.search(body)) is not None:
            if self.unreachable is None:
                self.unreachable = f"a process could not reach torch_xla's mesh master at {visible(mesh.group(1), 200)}"
                self.check = "XRT's rendezvous (XRT_TPU_CONFIG, the TPU's or the mesh master's address), a firewall"
            return True
        if _IN_USE.search(body) is not None:
            if self.unreachable is None:
                self.unreachable = "the c10d store could not listen on its port: another process held it"
            return True
        if (found := _CLIENTS.search(body) or _RENDEZVOUS.search(body)) is not None:
            if self.unreachable is None:
                self.unreachable = _never_met(found)
            return True
        if ("SocketImpl" in body or "TCPStore server" in body) and (lost := _LOST.search(body)) is not None:
            if len(self.lost) < MAX_WAITS:
                self.lost.add(rank)
            if self.server is None and lost.group(1):
                self.server = f"{visible(lost.group(1), 200)}:{lost.group(2)}"
            return True
        if (found := _BARRIER.search(body)) is not None:
            who, key, world, count = found.groups()
            if int(world) <= MAX_COUNT and int(count) <= MAX_COUNT:
                most = max(int(count), self.counted[1] if self.counted else 0)
                self.counted = (int(world), most, visible(key, 200))
                if int(who) < MAX_COUNT:
                    self.barrier_ranks.add(int(who))
            return True
        if WAITED.search(body) is None or len(self.waits) >= MAX_WAITS:
            return False
        root = _ROOT.search(body)
        waiter = rank if rank is not None else int(root.group(1)) if root else None
        said = (
            "waited for the communicator's ncclUniqueId" if root else "its wait for a key another rank sets timed out"
        )
        self.waits.append(_wait(body, root, waiter, said))
        return True

    def barrier_said(self) -> str | None:
        """Why nobody is to blame where the barrier counted more arrivals than the world has."""
        if self.counted is None or self.counted[1] <= self.counted[0]:
            return None
        world, count, key = self.counted
        return (
            f"the store-based barrier of {key} counted {count} arrivals in a world of {world}: processes of "
            "another launch met in the same store (two jobs on one MASTER_PORT, a file store's file left from a "
            "run before, ranks numbered beyond the world): the launch, not a rank"
        )

    def short(self) -> tuple[int, int, str] | None:
        """The barrier's world, arrivals and key where fewer arrived than the world has."""
        if self.counted is None or self.counted[1] >= self.counted[0]:
            return None
        return self.counted

    def lost_said(self) -> str | None:
        """The ranks that lost the store, in words, and where to look."""
        if not self.lost:
            return None
        ranks = sorted(r for r in self.lost if r is not None)
        who = rank_word(ranks) if ranks else "a process"
        at = f" at {self.server}" if self.server else ""
        return (
            f"{who} lost the c10d store{at}: its server shut down or crashed, so the process that hosted it (rank "
            "0's, or torchrun's agent's on its node) ended first; how, these lines do not say: that node's log will"
        )

    def in_subgroups(self) -> bool:
        """The waits the lines show were for other groups' communicators than the world's (none
        said to be the world's): rank 0 has no part in them that the others' ranks lack."""
        return any(w.subgroup for w in self.waits) and all(w.subgroup is not False for w in self.waits)

    def roots_at_most(self) -> int | None:
        """The highest rank the groups' roots the waits awaited may be, where each says a bound."""
        bounds = [w.root_at_most for w in self.waits if w.subgroup]
        return max(bounds) if bounds and all(b is not None for b in bounds) else None  # type: ignore[type-var]

    def waiters(self) -> set[int]:
        """The ranks shown waiting in the store."""
        return {w.rank for w in self.waits if w.rank is not None}

    def waiting(self) -> set[int]:
        """The ranks shown waiting for another: in the store, or in a barrier while the main process
        ran a block first (a traceback of theirs, cut or not, is that wait)."""
        return self.waiters() | {r for r, _ in self.main_first if r is not None}

    def awaited(self) -> list[int]:
        """The ranks the waits name as awaited, each once."""
        return list(dict.fromkeys(w.awaited for w in self.waits if w.awaited is not None))

    def traceback(self, rank: int | None, frames: list[StackFrame], in_collective: bool) -> None:
        """A traceback's frames: torchrun's agent's at its first rendezvous (not a restart's, not in the loop
        that watches its workers run, not raising their failure), after a wait in the store no rank says it
        waited; a wait in a barrier inside a block the main process runs first."""
        agent = any(part in f.file for f in frames for part in _AGENT)
        calls = {f.func for f in frames}
        started = (
            "_restart_workers" in calls
            or ("_invoke_run" in calls and "_initialize_workers" not in calls)
            or any("ChildFailedError" in (f.code or "") for f in frames)
        )
        if rank is None and agent and not started and any(w.rank is None for w in self.waits):
            self.agent_waited = True
        if len(self.main_first) >= MAX_WAITS:
            return
        context = next((f.func for f in reversed(frames) if f.func in _FIRST), None) if in_collective else None
        if context is None and len(frames) >= 2 and frames[-1].func == "__enter__":
            # cut as it entered the block: a process but the main one waits there, the main one yields at once
            code = frames[-2].code or ""
            context = next((name for name in _FIRST if re.search(rf"(?<!\w){name}\(", code)), None)
        if context is not None:
            self.main_first.append((rank, context))


def _wait(body: str, root: re.Match[str] | None, waiter: int | None, said: str) -> StoreWait:
    """A wait in the store, read against its group: the ranks a communicator's set-up names
    (``[1] ... from [0]``) are its group's, another's than the world's where its prefix says so
    or the waiter's own rank differs. A group's ranks are its members' in order (``new_group``
    sorts them), so the waiter ``r``, its group's ``g``, waits for a root among ranks 0 to ``r - g``:
    rank 0 itself where ``g`` is ``r``."""
    pg = PG.search(body) if "PG" in body else None
    named = pg_prefix(pg)[:2] if pg is not None else None
    local = int(root.group(1)) if root else None
    if named is not None:
        subgroup: bool | None = named[0] != WORLD_GROUP and named[1] != DEFAULT_PG
    else:
        subgroup = None if local is None or waiter is None else (True if waiter != local else None)
    if root is None or waiter is None or local is None or waiter < local:
        return StoreWait(waiter, None, said, subgroup)
    origin = int(root.group(2))
    if not subgroup:
        return StoreWait(waiter, origin, said, subgroup)  # the world's ranks, or a group's as low as they go
    first = origin == 0 and waiter == local  # members 0 to r: its root is rank 0
    return StoreWait(waiter, 0 if first else None, said, True, None if first else waiter - local)


def _never_met(found: re.Match[str]) -> str:
    """What the store's host, or torchrun's rendezvous, says of processes that never met it."""
    if found.re is _CLIENTS:
        seconds, joined, world = found.groups()
        return (
            f"the store's host waited {seconds}s for its clients and {joined} of {world} joined: the others never "
            "reached it"
        )
    if found.group(1):
        return "torchrun's rendezvous timed out before every node joined it"
    return "a process could not connect to the rendezvous's c10d store"
