"""Evidence bundles: what a critical alert was based on, kept on disk before anything kills
the ranks.

One folder per critical alert, named by the time it was taken and the alert's kind
(``20261122-031502-hang``); when distmon ends the job it takes a fresh one::

    alert.json              the alert, as ``distmon report --json`` prints it
    alert.txt               the alert in words, and what the bundle holds or lacks and why
    ranks.json              every rank's last report
    stacks.txt              the named ranks' stacks: Python as the rank reported it, Python and
                            native from outside (py-spy) where that could be taken
    nccl_trace_rank_<rank>  each rank's Flight Recorder dump, in torch's own format

The dumps carry the file names torch gives its own (``TORCH_FR_DUMP_TEMP_FILE``), and
nothing else in the folder ends in a number, so ``torchfrtrace BUNDLE`` reads it as it is.

The store is bounded: the newest ``keep`` bundles are kept and older ones deleted while the
folders add up to more than ``max_bytes``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import time
from pathlib import Path

from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.whereabouts import frame_lines
from distmon.monitor.state.words import date_time, ranks_text, stack_lines
from distmon.node.pyspy import OutsideStack
from distmon.wire import Report
from distmon.wire.sockets import Dump

DUMP_PREFIX = "nccl_trace_rank_"
KEEP = 20
MAX_BYTES = 2 * 1024**3
BUNDLE_NAME = re.compile(r"^\d{8}-\d{6}-[a-z_]+(-\d+)?$")


class Bundle:
    """One alert's evidence. The monitor's loop decides what goes in (:meth:`accept`); the
    writer thread makes the folder (:meth:`EvidenceStore.place`) and writes the files."""

    def __init__(self, alert: Alert, request: int, expected: list[int], deadline: float) -> None:
        self.alert = alert
        self.request = request
        self.expected = set(expected)
        self.received: set[int] = set()
        self.deadline = deadline
        self.path: Path | None = None
        """The folder, once placed; None if it could not be made."""

    @property
    def complete(self) -> bool:
        return self.received >= self.expected

    def accept(self, dump: Dump) -> bool:
        """Whether ``dump`` belongs here and is new: a rank not asked, or heard twice, is not."""
        if dump.request != self.request or dump.rank not in self.expected or dump.rank in self.received:
            return False
        self.received.add(dump.rank)
        return True

    def write(self, dump: Dump) -> None:
        if self.path is not None:
            (self.path / f"{DUMP_PREFIX}{dump.rank}").write_bytes(dump.data)

    def finish(
        self, job: str | None, world: int | None, reports: dict[int, Report], stacks: dict[int, OutsideStack | None]
    ) -> None:
        """Write the alert, every rank's last report and the named ranks' stacks."""
        if self.path is None:
            return
        alert = self.alert
        _write_json(self.path / "alert.json", alert.to_json())
        every = {str(r): dataclasses.asdict(report) for r, report in sorted(reports.items())}
        _write_json(self.path / "ranks.json", {"job": job, "world": world, "ranks": every})
        (self.path / "stacks.txt").write_text("\n".join(_stack_text(reports, alert.ranks, stacks)) + "\n")
        missing = sorted(self.expected - self.received)
        lines = [
            f"{alert.severity.upper()} {alert.headline} (raised {date_time(alert.t)})",
            "",
            alert.detail,
            "",
            f"Flight Recorder dumps: {len(self.received)} of {len(self.expected)} ranks asked "
            f"(read them with `torchfrtrace {self.path}`).",
        ]
        if missing:
            lines.append(
                f"No dump from ranks {ranks_text(missing)}: gone, or their agent thread could not run "
                "(a native call holding the GIL; see stacks.txt)."
            )
        (self.path / "alert.txt").write_text("\n".join(lines) + "\n")


class EvidenceStore:
    def __init__(self, root: str, keep: int = KEEP, max_bytes: int = MAX_BYTES) -> None:
        self.root = Path(root)
        self.keep = keep
        self.max_bytes = max_bytes

    def check(self) -> str | None:
        """Why bundles cannot be written under ``root``, in one line; None if they can."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot create the evidence folder {self.root}: {e.strerror}"
        if not os.access(self.root, os.W_OK | os.X_OK):
            return f"cannot write in the evidence folder {self.root}"
        return None

    def place(self, bundle: Bundle, now: float) -> Path | None:
        """Make ``bundle``'s folder, named by ``now`` and its alert, the oldest bundles pruned to
        make room; None (and no folder) if it cannot be made."""
        base = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{bundle.alert.kind}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._prune(room_for=1)
            for n in range(1, 1000):
                path = self.root / (base if n == 1 else f"{base}-{n}")
                with contextlib.suppress(FileExistsError):
                    path.mkdir()
                    bundle.path = path
                    return path
        except OSError:
            return None
        return None

    def bundles(self) -> list[Path]:
        """The bundles under ``root``, oldest first (other files there are left alone)."""
        try:
            found = [p for p in self.root.iterdir() if p.is_dir() and BUNDLE_NAME.match(p.name)]
        except OSError:
            return []
        return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))

    def _prune(self, room_for: int = 0) -> None:
        bundles = self.bundles()
        sizes = [_size(p) for p in bundles]
        while bundles and (len(bundles) + room_for > self.keep or sum(sizes) > self.max_bytes):
            shutil.rmtree(bundles.pop(0), ignore_errors=True)
            sizes.pop(0)

    def prune(self) -> None:
        """Hold the size cap once a bundle is written."""
        with contextlib.suppress(OSError):
            self._prune()


def _stack_text(reports: dict[int, Report], ranks: list[int], stacks: dict[int, OutsideStack | None]) -> list[str]:
    lines: list[str] = []
    for rank in ranks:
        r = reports.get(rank)
        if r is None:
            lines += [f"rank {rank}: never reported", ""]
            continue
        lines.append(f"rank {rank} ({r.host}, pid {r.pid}), last report {date_time(r.t)}:")
        lines.append("  Python, as the rank reported it:")
        lines += stack_lines(r.stack, depth=40, indent="    ")
        outside = stacks.get(rank)
        if outside is None:
            lines.append("  From outside: not taken (no answer before the bundle was written)")
        elif outside.frames is None:
            lines.append(f"  From outside: not taken: {outside.error}")
        else:
            gil = ", holding the GIL" if outside.owns_gil else ""
            kind = "Python" if outside.partial else "Python and native"
            lines.append(f"  {kind}, from outside ({outside.how}){gil}:")
            if outside.partial:
                lines.append(f"    (Python frames only: {outside.partial})")
            lines += frame_lines(outside.frames, 40, "    ")
        lines.append("")
    return lines


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=1, default=str) + "\n")


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
