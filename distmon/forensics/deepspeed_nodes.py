"""The nodes of a job DeepSpeed's launcher ran over pdsh. Each node's launcher prints the global
ranks each node runs (``global_rank_mapping=defaultdict(<class 'list'>, {'node1': [0, ..., 7],
'node2': [8, ..., 15]})``), and under pdsh's ``node2: `` before each of its lines, that a worker of
its node ended (``... exits with return code = -9``), which one it does not say (the command its
line prints is the last it built); pdsh then says the node's ssh ended (``pdsh@node1: node2: ssh
exited with exit code 247``: 256 less the signal). The node whose worker ended first holds the
rank that failed: its ranks are suspected, the rank itself where the node ran one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible
from distmon.monitor.state.words import rank_word

MAX_NODES = 4096
"""Nodes kept from a mapping: more is no real job's."""
MAX_RANKS = 1 << 17
"""Ranks kept from a mapping, over all its nodes."""
_MAPPING = re.compile(r"global_rank_mapping=defaultdict\(<class 'list'>, \{")
_NODE = re.compile(r"'([\w.-]{1,253})': \[([\d, ]{0,1000000})\]")
_ENDED = re.compile(r" exits with return code = (-?\d{1,4})\s*$")
_SPAWNED = re.compile(r"\bprocess (\d{1,9}) spawned with command: \[.{0,2000}?'--local[_-]rank=(\d{1,4})'")
"""The launcher on each worker it starts (``process 41202 spawned with command: ['python', ..., '--local_rank=1'
...]``): its pid and local rank."""
_PDSH = re.compile(r"pdsh@[\w.-]{1,253}: ([\w.-]{1,253}): ssh exited with exit code (\d{1,3})")
_SIGNALLED = range(129, 255)
"""The exit codes of a node's launcher that ended by its worker's signal, as ssh passes them on: its
negative code's low byte (247: SIGKILL's -9). 255 is ssh's own failure to reach the node."""


@dataclass(frozen=True)
class NodeEnded:
    host: str
    code: int
    at: float | None


@dataclass
class DeepSpeedNodes:
    """Each node's global ranks, and the nodes whose launcher saw a worker end, in the log's order."""

    ranks: dict[str, list[int]] = field(default_factory=dict)
    ended: list[NodeEnded] = field(default_factory=list)
    spawned: dict[int, int] = field(default_factory=dict)
    """Each worker's local rank by its pid, as a launcher (not pdsh's label) says it started them."""

    def line(self, body: str, at: float | None, host: str = "") -> bool:
        """Reads ``body`` if it is the mapping, or a node's launcher's or pdsh's word on its end
        (``host``: the node pdsh's label before the line names)."""
        if "global_rank_mapping" in body and (mapping := _MAPPING.search(body)) is not None:
            for node in _NODE.finditer(body, mapping.end()):
                numbers = [int(n) for n in node.group(2).split(",") if n.strip()]
                kept = sum(map(len, self.ranks.values()))
                if len(self.ranks) < MAX_NODES and kept + len(numbers) <= MAX_RANKS:
                    self.ranks[visible(node.group(1), 253)] = numbers
            return True
        if "spawned with" in body and (spawned := _SPAWNED.search(body)) is not None:
            if len(self.spawned) < MAX_RANKS and not host:
                self.spawned[int(spawned.group(1))] = int(spawned.group(2))
            return True
        found = _PDSH.search(body) if "ssh exited" in body else None
        if found is not None:
            host, code = found.group(1), int(found.group(2))
            code = code - 256 if code in _SIGNALLED else code
        elif host and "exits with return code" in body and (ended := _ENDED.search(body)) is not None:
            code = int(ended.group(1))
        else:
            return False
        if code != 0 and len(self.ended) < MAX_NODES and all(e.host != host for e in self.ended):
            self.ended.append(NodeEnded(visible(host, 253), code, at))
        return False  # the launcher's own reading counts the line

    def rank_of(self, pid: int) -> int | None:
        """The global rank of the worker the launcher started as ``pid``, where its mapping has one node."""
        local = self.spawned.get(pid)
        ranks = next(iter(self.ranks.values())) if len(self.ranks) == 1 else []
        return ranks[local] if local is not None and local < len(ranks) else None

    def first(self) -> NodeEnded | None:
        """The node a worker ended on first, where the mapping gives its ranks: by the time its line
        gives, else the first the log shows."""
        placed = [e for e in self.ended if e.host in self.ranks]
        timed = [e for e in placed if e.at is not None]
        return min(timed, key=lambda e: e.at or 0.0) if timed else next(iter(placed), None)

    def suspected(self) -> list[tuple[int, str]]:
        """The ranks of the node a worker ended on first, with why."""
        first = self.first()
        if first is None:
            return []
        ranks = self.ranks[first.host]
        how = f"signal {-first.code}" if first.code < 0 else f"exit code {first.code}"
        later = " first" if len(self.ended) > 1 else ""
        if len(ranks) == 1:
            return [(ranks[0], f"the one worker on {first.host}, whose DeepSpeed launcher saw it end by {how}{later}")]
        why = (
            f"one of {rank_word(ranks)} on {first.host}, whose DeepSpeed launcher saw a worker end by {how}{later}; "
            "which, it does not say"
        )
        return [(rank, why) for rank in ranks]
