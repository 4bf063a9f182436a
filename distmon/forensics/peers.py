"""What a transport says when the peer at the other end went away, and who that peer was:
gloo's pairs, NCCL's sockets and InfiniBand, Open MPI's peers::

    RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:14004
    [.../pair.cc:589] Read error [192.168.70.92]:25266: Connection reset by peer
    socketProgress: Connection closed by remote peer ip-172-31-36-217.ec2.internal<59116>
    NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe
    NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129
    NCCL WARN NET/IB: Got completion from peer 10.0.0.2<5486> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=...
    NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129     (NCCL 2.4-2.11: no peer)
    An MPI communication peer process has unexpectedly disconnected. ... Peer host: node-316

A closed connection says the peer's process ended or its node went away: the peer is where to
look, the rank that saw it only a witness. An InfiniBand completion error (a work request the
fabric could not deliver: status 12 is the retry count exceeded) says the link between the two
failed, not a process: the network, no rank. (c10d's store is no peer: a connection to it lost is
read by :mod:`~distmon.forensics.stores`.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_LOSSES = 64
CLOSED = "closed"
FABRIC = "fabric"

_CLOSED = re.compile(
    r"Connection (?:closed by (?:remote )?peer|reset by peer) \[?([\w.:%-]{1,200}?)\]?(?::\d{1,6}|<\d{1,6}>)"
    r"|(?:Read|Write) error \[([\w.:%-]{1,200})\]:\d{1,6}: Connection reset by peer"
    r"|Call to recv from ([\w.:%-]{1,200})<\d{1,6}> failed"
    r"|Peer host:\s*([\w.-]{1,200})"
)
_FABRIC = re.compile(
    r"Got completion (?:from peer ([\w.:%-]{1,200})<\d{1,6}> )?with (?:error |status=)(?:\w{1,40}\()?(\d{1,6})"
)


@dataclass(frozen=True)
class PeerLoss:
    """One transport's word that its peer went away."""

    peer: str
    """The peer's host name or address, as the transport wrote it."""
    how: str
    """:data:`CLOSED` (the peer's end went away) or :data:`FABRIC` (the link failed)."""
    said: str
    witness: int | None
    """The rank whose line says it, where the line has one."""


@dataclass
class PeerLines:
    losses: list[PeerLoss] = field(default_factory=list)

    def line(self, line: str, rank: int | None) -> bool:
        """Reads ``line`` if a transport says in it that its peer went away."""
        lower = line.lower()
        if "peer" not in lower and "Call to recv" not in line and "completion" not in lower:
            return False
        fabric = _FABRIC.search(line)
        closed = None if fabric else _CLOSED.search(line)
        if fabric is None and closed is None:
            return False
        if fabric is not None:
            peer, how = fabric.group(1) or "", FABRIC
            said = f"InfiniBand completion error {fabric.group(2)}" + (
                f" from peer {visible(peer, 200)}" if peer else ""
            )
        else:
            assert closed is not None
            peer, how = next(g for g in closed.groups() if g), CLOSED
            said = f"connection closed by peer {visible(peer, 200)}"
        loss = PeerLoss(visible(peer, 200), how, said, rank)
        if len(self.losses) < MAX_LOSSES and loss not in self.losses:
            self.losses.append(loss)
        return True

    @property
    def fabric_only(self) -> bool:
        return bool(self.losses) and all(loss.how == FABRIC for loss in self.losses)

    def peers(self) -> list[str]:
        """The peers lost, each once, in the order the log names them."""
        return list(dict.fromkeys(loss.peer for loss in self.losses if loss.how == CLOSED))
