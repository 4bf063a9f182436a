"""Whether a rank's exception is a consequence: a peer, or one of its DataLoader workers, went
away first (:data:`~distmon.wire.PEER_LOST`, :data:`~distmon.wire.WORKER_DIED`), so the cause
is elsewhere. The monitor decides it, once per exception, as the report that carries it comes
in: a pattern fixed needs a new monitor, not every job redeployed, and a replay decides as the
live monitor did.

The verdict is a column (:attr:`Columns.consequence
<distmon.monitor.state.columns.Columns.consequence>`), so a rule reads it over every rank as an
array. Taking a batch in costs a few array operations more; a report is read (its exception's
message alone) only for a rank that newly raised, once, since a process raises once (its
uncaught exception). Ranks before
issue 42 decided it themselves, as header bit 128; the monitor ignores that bit and decides for
their exceptions as for any other.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state.columns import I8, Columns

JUDGED = 1
"""The rank's exception was read; without it, the rank raised nothing, or the report with its
exception has not come (through a relay, the batch that had it was lost: the next has it)."""
LOST_PEER = 2
"""It raised because a peer went away."""
LOST_WORKER = 4
"""It raised because one of its DataLoader workers died."""


def judge_exception(raw: bytes | None) -> int:
    """The verdict on the exception in a report as received: :data:`JUDGED`, with the bits of
    what went away first. Only the message is read, not the whole report built; a report
    without one is judged to be no consequence (a malformed one is counted when read)."""
    message = wire.exception_message(raw or b"") or ""
    lost_peer = LOST_PEER if wire.PEER_LOST.search(message) else 0
    lost_worker = LOST_WORKER if wire.WORKER_DIED.search(message) else 0
    return JUDGED | lost_peer | lost_worker


def judge_new(
    cols: Columns, raw: list[bytes | None], rank: I8, flags: npt.NDArray[np.uint8], sent: npt.NDArray[np.bool_]
) -> None:
    """The verdicts of ``rank`` (distinct ranks, whose frames carried ``flags`` and, where
    ``sent``, the report now kept in ``raw``): forgotten where the rank no longer raised,
    judged where its report just came with an exception not judged yet."""
    raised = (flags & wire.FLAG_RAISED) != 0
    cols.consequence[rank[~raised]] = 0
    for r in rank[raised & sent & (cols.consequence[rank] == 0)].tolist():
        cols.consequence[r] = judge_exception(raw[r])
