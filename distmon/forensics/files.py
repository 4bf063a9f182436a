"""The files ``distmon analyze`` is given, found and opened: every path walked, each file
sniffed as a dump or a log, each dump boiled down to its rank's groups as it is read, and
one line in ``problems`` for each file that could not be read."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from distmon.flightrecorder import MAX_DUMP_BYTES, DumpError, RankDump, group_ranks, load, read_dump
from distmon.forensics.logs import LogFacts, read_log
from distmon.monitor.admission import MAX_WORLD

MAX_FILES = 1 << 20
_TRAILING_RANK = re.compile(r"(\d{1,9})(?:\.(?:json|pkl|pickle|pt|bin))?$")
SNIFF = 4096


@dataclass
class Files:
    """What the files hold, read one at a time: a dump is boiled down to its rank's groups
    as it is read (8192 dumps of 2000 entries are gigabytes)."""

    dumps: dict[int, RankDump] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    configs: dict[str, list[int]] = field(default_factory=dict)
    """Group name -> its global ranks, from every dump's ``pg_config``."""
    written: list[float] = field(default_factory=list)
    log: LogFacts = field(default_factory=LogFacts)
    logs: int = 0
    problems: list[str] = field(default_factory=list)

    def read(self, path: str) -> None:
        kind = sniff(path, self.problems)
        if kind == "log":
            self.logs += read_log_file(path, self.log, self.problems)
        elif kind == "dump":
            self._read_dump(path)

    def _read_dump(self, path: str) -> None:
        rank = rank_of(path)
        if rank is None:
            self.problems.append(f"{path}: a dump, but its name does not end in the rank's number")
        elif rank >= MAX_WORLD:
            self.problems.append(f"{path}: rank {rank}, beyond the {MAX_WORLD} ranks distmon judges")
        elif rank in self.dumps:
            self.problems.append(f"{path}: a second dump of rank {rank} (read {self.sources[rank]})")
        elif (dump := load_dump(path, self.problems)) is not None:
            for name, config in dump.get("pg_config", {}).items():
                members = group_ranks(config)
                if isinstance(name, str) and members:
                    self.configs.setdefault(name, members)
            self.dumps[rank] = read_dump(dump, self.configs)
            self.sources[rank] = path
            self.written.append(mtime(path))


def mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def walk(paths: list[str], problems: list[str]) -> Iterator[str]:
    count = 0
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)
        elif os.path.exists(path):
            found = [path]
        else:
            problems.append(f"{path}: no such file or folder")
            continue
        for file in found:
            count += 1
            if count > MAX_FILES:
                problems.append(f"more than {MAX_FILES} files: the rest left out")
                return
            yield file


def sniff(path: str, problems: list[str]) -> str | None:
    """``dump`` (torch's pickle or JSON), ``log`` (text), or None (said in ``problems``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF)
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
        return None
    if head[:1] == b"\x80" or head.lstrip()[:1] == b"{":
        return "dump"
    if b"\0" in head:
        problems.append(f"{path}: neither a Flight Recorder dump nor a log")
        return None
    return "log"


def rank_of(path: str) -> int | None:
    found = _TRAILING_RANK.search(os.path.basename(path))
    return int(found.group(1)) if found else None


def load_dump(path: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        if os.path.getsize(path) > MAX_DUMP_BYTES:
            raise DumpError(f"{os.path.getsize(path) >> 20} MiB, over the {MAX_DUMP_BYTES >> 20} MiB a dump may have")
        with open(path, "rb") as f:
            return load(f.read())
    except DumpError as e:
        problems.append(f"{path}: {e}")
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
    return None


def read_log_file(path: str, log: LogFacts, problems: list[str]) -> int:
    """1 for a job's log (lines of ranks or of the watchdog), 0 for any other text (an empty
    file, such as a marker, without a word)."""
    before = log.matched
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            read_log(f, log)
            empty = f.tell() == 0
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
        return 0
    if log.matched > before:
        return 1
    if not empty:
        problems.append(f"{path}: text with no watchdog line and no [rankN]: prefix, not a job log")
    return 0
