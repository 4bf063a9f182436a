"""fairseq's check that every worker's gradient norm is the same (``trainer.py``'s ``_check_grad_norms``), raised
by whichever rank compared them first::

    FloatingPointError: Fatal error: gradients are inconsistent between workers. Try --ddp-backend=legacy_ddp. ...
    --------------------------------------------------------------------------------
    grad_norm across the workers:
    rank   0 = 0.81221455
    rank   6 = nan

Where a few ranks' norms differ from the rest (``nan``, or another number), their gradients are their own (a bad
sample, their GPU): those ranks, not the one that raised."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from distmon.guards.text import visible

HEADER = "grad_norm across the workers:"
_ROW = re.compile(r"^\s{0,8}rank\s{1,8}(\d{1,9}) = (\S{1,40})\s*$")
MAX_ROWS = 1 << 17
"""Workers kept from one table: more is no real job's."""


@dataclass
class GradNorms:
    """The last table of the workers' gradient norms the log holds."""

    norms: dict[int, str] = field(default_factory=dict)
    reading: bool = False

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is the table's header or one of its rows."""
        if HEADER in body:
            self.norms, self.reading = {}, True
            return True
        row = _ROW.match(body) if self.reading else None
        if row is None:
            self.reading = False
            return False
        if len(self.norms) < MAX_ROWS:
            self.norms[int(row.group(1))] = visible(row.group(2), 40)
        return True

    def odd(self) -> tuple[list[int], str] | None:
        """The few ranks whose norm is not the one most share, and why."""
        counts = Counter(self.norms.values())
        if len(self.norms) < 3 or len(counts) < 2:
            return None
        common = counts.most_common(1)[0][0]
        odd = sorted(rank for rank, norm in self.norms.items() if norm != common)
        if len(odd) * 2 >= len(self.norms):
            return None
        norms = ", ".join(sorted({self.norms[rank] for rank in odd}))
        return odd, (
            f"{ODD_NORM} {norms} where the other {len(self.norms) - len(odd)} ranks' was {common} (fairseq's check "
            "across the workers, whichever rank raised it): its own gradients"
        )


ODD_NORM = "had a gradient norm of"
"""How a rank the table sets apart is said."""
CHECK_IT = (
    "find what differs on it: its batch (a corrupt or extreme sample: log the batch's ids on that rank), its GPU "
    "(`nvidia-smi -q -d ECC` and `dmesg | grep -i xid` on its host; rerun the step on another GPU), a GPU of another "
    "generation or precision than its peers'"
)
"""What to do about a rank whose gradients alone were not finite, or not its peers'."""
