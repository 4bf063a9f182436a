"""What tests look for in a monitor's alerts."""

from __future__ import annotations

import re
from typing import Any

ROOT = re.compile(r"\b(holds? up the job|waits? for (it|them), in )")


def is_root_hang(alert: dict[str, Any]) -> bool:
    """The hang alert that names the ranks others wait for: ``rank 5 is asleep in clock_nanosleep;
    7 ranks wait for it, in ...`` when the monitor could look at it, ``rank 5 holds up the job:
    ...`` when it could not."""
    return alert["kind"] == "hang" and bool(ROOT.search(alert["summary"]))
