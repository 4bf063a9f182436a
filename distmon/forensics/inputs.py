"""The files ``distmon analyze`` is given, found and opened: every path walked, each file
sniffed as a dump or a log, each dump boiled down to its rank's groups as it is read, and
one line in ``problems`` for each file that could not be read and each folder that could
not be listed.

Files come from other machines, other users and broken disks, so nothing but a regular file
is opened (a FIFO would block the reader forever, a device never ends), a dump is read
within :mod:`distmon.flightrecorder`'s limits, and a log line by line, each cut at
:data:`~distmon.forensics.pasted.MAX_LINE` characters, for at most :data:`MAX_LOG_SECONDS`.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from typing import IO, cast

from distmon.flightrecorder.fields import RankDump
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.logs import read_log
from distmon.forensics.parallel import read_all
from distmon.forensics.pasted import MAX_LINE
from distmon.guards.files import open_regular, why_not
from distmon.monitor.state.admission import MAX_WORLD

MAX_FILES = 1 << 20
MAX_LOG_SECONDS = 300.0
"""Seconds one log may take to be read; the lines read by then are kept."""
_NAMED_RANK = re.compile(r"rank[_.-]?(\d{1,9})(?!\d)", re.IGNORECASE)
_TRAILING_RANK = re.compile(r"(\d{1,9})(?:\.(?:json|pkl|pickle|pt|bin))?$")
SNIFF = 4096
_JSON_OBJECT = re.compile(rb'\s*\{\s*"')
"""A JSON dump's start; a log may start with a dict Python printed (``{'loss': 0.11}``)."""
_DUMP_KEYS = re.compile(rb'"(?:version|entries|pg_status|pg_config|nccl_comm_state)"\s*:')
"""A Flight Recorder dump's own keys: a JSON object without any is a paste's (a model's config)."""


@dataclass
class Files:
    """What the files hold: a log read as it comes, the dumps named as they come and read
    together on every core, each boiled down to its rank's groups as it is read (8192 dumps
    of 2000 entries are gigabytes)."""

    dumps: dict[int, RankDump] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    configs: dict[str, list[int]] = field(default_factory=dict)
    """Group name -> its global ranks, from every dump's ``pg_config``."""
    written: list[float] = field(default_factory=list)
    log: LogFacts = field(default_factory=LogFacts)
    logs: int = 0
    problems: list[str] = field(default_factory=list)
    unread: dict[int, str] = field(default_factory=dict)
    """Rank -> why its dump, found, was not read (its problem line says more)."""
    _named: dict[int, list[str]] = field(default_factory=dict)
    """Rank -> the dumps named for it, not read yet (two where two runs' dumps lie together)."""

    def read(self, path: str, named: bool = False) -> None:
        """One file; ``named`` on the command line rather than found in a folder."""
        kind = sniff(path, self.problems, named)
        if kind is None and (rank := rank_of(path)) is not None:
            self.unread.setdefault(rank, "its dump could not be read")
        if kind == "log":
            self.logs += read_log_file(path, self.log, self.problems, named)
        elif kind == "dump":
            self._read_dump(path)

    def _read_dump(self, path: str) -> None:
        """A dump is only named here; :meth:`read_dumps` reads them all at once, on every core."""
        rank = rank_of(path)
        if rank is None:
            self.problems.append(f"{path}: a dump, but its name does not end in the rank's number")
        elif rank >= MAX_WORLD:
            self.problems.append(f"{path}: rank {rank}, beyond the {MAX_WORLD} ranks distmon judges")
        else:
            self._named.setdefault(rank, []).append(path)

    def read_dumps(self) -> None:
        """Every dump named so far, read (:mod:`distmon.forensics.parallel`), in rank order. Of two
        dumps of one rank (a job run again, its dumps beside the first run's), the one written
        last is judged, by the latest time it holds, else by its file's."""
        found = read_all([(path, rank) for rank, paths in self._named.items() for path in paths])
        self._named.clear()
        ordered = sorted(
            found, key=lambda r: (r.rank, r.dump is not None, (r.dump.t or 0) if r.dump else 0, mtime(r.path))
        )
        for read, after in itertools.zip_longest(ordered, ordered[1:]):
            later = after is not None and after.rank == read.rank
            if read.dump is None:
                self.problems.append(f"{read.path}: {read.problem}")
                if not later:
                    self.unread.setdefault(read.rank, "its dump could not be read")
            elif later:
                self.problems.append(
                    f"{read.path}: a second dump of rank {read.rank}, not the latest: {after.path} is judged"
                )
            if read.dump is None or later:
                continue
            for name, members in read.configs.items():
                self.configs.setdefault(name, members)
            self.dumps[read.rank] = read.dump
            self.sources[read.rank] = read.path
            self.written.append(mtime(read.path))


def mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def walk(paths: list[str], problems: list[str], restarts: list[str]) -> Iterator[str]:
    """Every file under ``paths``, each once (a link to a file already given, or a path named
    twice, is not read again); a folder's hidden files and folders (``.DS_Store``, an editor's
    swap file, macOS's ``._`` copies, a notebook's checkpoints) are left out, and so are the
    files of a torchrun run's attempts before its last (said in ``restarts``). A path or a
    folder that cannot be read is said in ``problems``."""
    count = 0
    seen: set[tuple[int, int]] = set()

    def unlisted(e: OSError) -> None:
        problems.append(f"{e.filename}: a folder that cannot be read ({e.strerror}): its files are left out")

    for path in paths:
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError as e:
            problems.append(f"{path}: {why_not(path, e)}")
            continue
        found = _torchruns(sorted(_unhidden(path, unlisted)), restarts) if is_dir else [path]
        for file in found:
            try:
                identity = os.stat(file)
            except OSError:
                pass  # said when it is opened
            else:
                if (identity.st_dev, identity.st_ino) in seen:
                    continue
                seen.add((identity.st_dev, identity.st_ino))
            count += 1
            if count > MAX_FILES:
                problems.append(f"more than {MAX_FILES} files: the rest left out")
                return
            yield file


_ATTEMPT = re.compile(r"^(.*)[/\\]attempt_(\d{1,6})[/\\]")
"""A file of one attempt of a torchrun run, in its log folder (``--log-dir``, else a temporary one):
``RUN/attempt_N/LOCAL_RANK/stderr.log``, N counting its agent's restarts of the workers."""


def _torchruns(files: list[str], restarts: list[str]) -> list[str]:
    """The files but those of a torchrun run's attempts before its last (that attempt ended the job, as
    a log whose agent restarted the workers is judged on its last attempt), and but a worker's
    ``error.json`` beside its ``stderr.log``, which holds the same traceback."""
    last: dict[str, int] = {}
    for file in files:
        if found := _ATTEMPT.match(file):
            last[found[1]] = max(last.get(found[1], 0), int(found[2]))
    for run, n in last.items():
        if n:
            times = "once" if n == 1 else f"{n} times"
            restarts.append(
                f"torchrun restarted the workers {times} ({os.path.basename(run)}): judged on its last attempt's "
                f"files (attempt_{n}), the earlier attempts' are not read"
            )
    given = set(files)
    return [
        f
        for f in files
        if ((found := _ATTEMPT.match(f)) is None or int(found[2]) == last[found[1]])
        and not (os.path.basename(f) == "error.json" and os.path.join(os.path.dirname(f), "stderr.log") in given)
    ]


def _unhidden(folder: str, unlisted: Callable[[OSError], None]) -> Iterator[str]:
    for where, folders, files in os.walk(folder, onerror=unlisted):
        folders[:] = [f for f in folders if f[:1] != "."]  # .git, .ipynb_checkpoints' copies
        yield from (os.path.join(where, f) for f in files if f[:1] != ".")


def sniff(path: str, problems: list[str], named: bool = False) -> str | None:
    """``dump`` (torch's pickle or JSON), ``log`` (text), or None (said in ``problems``, but
    for an empty file found in a folder: a rank's empty stderr is no problem)."""
    try:
        with open_regular(path) as f:
            head = f.read(SNIFF)
    except OSError as e:
        problems.append(f"{path}: {why_not(path, e)}")
        return None
    if not head:
        if rank_of(path) is not None:  # a dump's name: cut before anything was written
            problems.append(f"{path}: empty (0 bytes), no dump in it")
        elif named:
            problems.append(f"{path}: empty (0 bytes)")
        return None
    if head[:1] == b"\x80" or (_JSON_OBJECT.match(head) and _DUMP_KEYS.search(head)):
        return "dump"
    packed = next((how for magic, how in _PACKED if head.startswith(magic)), None)
    if packed is not None:
        unpack = "tar xf" if _TARRED.search(path) else _UNPACK[packed]  # GNU tar unpacks each of these
        problems.append(f"{path}: {packed}-compressed: unpack it first ({unpack}), then analyze what it holds")
        return None
    if head[257:262] == b"ustar":
        problems.append(f"{path}: a tar archive: unpack it first (tar xf), then analyze the folder it holds")
        return None
    if head.startswith(_UTF16):
        return "log"
    text = head.strip(b"\0")  # a hole logrotate's copytruncate left before the text, or after it
    if (len(text) - len(text.translate(None, _CONTROL))) * 100 > len(head):  # a binary's bytes, not a few NULs
        problems.append(f"{path}: neither a Flight Recorder dump nor a log")
        return None
    return "log"


_PACKED = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"(\xb5/\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
)
"""The magic numbers of the packed files logs come in (a rotated log's ``.gz``, a folder zipped to be sent)."""
_UNPACK = {"gzip": "gunzip -k", "bzip2": "bunzip2 -k", "xz": "unxz -k", "zstd": "unzstd", "zip": "unzip"}
_TARRED = re.compile(r"\.(?:tar\.\w{1,4}|tgz|tbz2?|txz)$", re.IGNORECASE)
"""A packed tar archive's name (a folder of logs or dumps tarred to be sent)."""
_CONTROL = bytes([*range(9), *range(14, 27), *range(28, 32)])
"""Bytes no text holds (tabs, line ends and the escape of colours aside), but for a stray NUL."""
_UTF16 = (b"\xff\xfe", b"\xfe\xff")
"""The byte-order marks of UTF-16 text (a log copied on Windows): read as such."""


def _text(raw: IO[bytes]) -> io.TextIOWrapper:
    """The file's text, UTF-16 where its byte-order mark says so, else UTF-8 (anything else replaced)."""
    head = raw.read(2)
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-16" if head in _UTF16 else "utf-8", errors="replace")


def rank_of(path: str) -> int | None:
    """The rank a dump's name gives: the number after ``rank`` (``fr_dump_rank_3_2025-09-23.pkl``), else the one it
    ends in (``nccl_trace_rank_3``, ``_dump_3``)."""
    name = os.path.basename(path)
    found = _NAMED_RANK.search(name) or _TRAILING_RANK.search(name)
    return int(found.group(1)) if found else None


class _Lines:
    """A log's lines, each cut at :data:`MAX_LINE` characters as it is read (a line of a
    gigabyte is never held whole), until :data:`MAX_LOG_SECONDS` have passed, and no further than the file's size
    as it was opened (a log still being written is read as it stood, not chased)."""

    def __init__(self, text: io.TextIOWrapper, until: float) -> None:
        self._text = text
        self._raw = cast(IO[bytes], text.buffer)
        self._until = until
        self._size = os.fstat(self._raw.fileno()).st_size
        self.cut_short = False
        """The time ran out before the end of the file."""

    def __iter__(self) -> Iterator[str]:
        while line := self._text.readline(MAX_LINE):
            if len(line) == MAX_LINE and not line.endswith("\n"):
                while (rest := self._text.readline(MAX_LINE)) and not rest.endswith("\n"):
                    pass
            yield line
            if time.monotonic() > self._until:
                self.cut_short = True
                return
            if self._raw.tell() > self._size + MAX_LINE:  # what was written since it was opened
                return


_RANKS_FILE = re.compile(r"(?:^|/)rank\.(\d{1,9})/std(?:out|err)$|(?:^|/)std_log_process_(\d{1,9})\.txt$")
"""A file that is one rank's output by its name: Open MPI's ``--output-filename DIR`` (``DIR/1/rank.13/stderr``),
Azure ML's ``user_logs/std_log_process_13.txt`` (the process's global rank)."""


_LOCAL_RANK_FILE = re.compile(r"(?:^|/)attempt_\d{1,6}/(\d{1,6})/(?:std(?:out|err)\.log|error\.json)$")
"""A file of one worker in torchrun's log folder, by its local rank (its node's first rank is not in the path)."""


_NAMED_RANK_FILE = re.compile(
    r"(?:^|/)(?:(?:py-?spy|stacks?|dump|trace|log)[_-]?)?rank[_-]?(\d{1,6})(?:[_-](?:py-?spy|stacks?|dump|trace|log))?"
    r"\.(?:txt|log|out)$"
)
"""A file a person named for its rank, nothing else in the name (``rank3.txt``, ``pyspy_rank3.txt``: ``py-spy
dump --pid PID > pyspy_rank3.txt`` for each rank of a hung job)."""


def _of_rank(path: str, lines: Iterable[str]) -> Iterator[str]:
    """The lines of a file its name gives a rank, each as that rank's (torchrun's ``[rank13]:`` before it; a
    line a label already places keeps it, in a file only a person named), or a local rank, as ``--tee`` labels it
    (``[default3]:``: its node's place found as for ``--tee``'s lines)."""
    name = path.replace(os.sep, "/")
    if found := _RANKS_FILE.search(name):
        label = f"[rank{next(g for g in found.groups() if g)}]:"
        yield from (f"{label}{line}" for line in lines)
    elif found := _LOCAL_RANK_FILE.search(name) or _NAMED_RANK_FILE.search(name):
        # since torch 2.2 a worker's lines in torchrun's folder carry its [rankN]:
        label = f"[default{found[1]}]:" if found.re is _LOCAL_RANK_FILE else f"[rank{found[1]}]:"
        yield from (line if line.startswith("[rank") else f"{label}{line}" for line in lines)
    else:
        yield from lines


_TEXT_KEYS = ("log", "textPayload", "message", "msg", "MESSAGE")
"""Where a log collector's export keeps a line's text: Docker's json-file (``log``), Google Cloud Logging
(``textPayload``, ``jsonPayload.message``), journald's ``-o json`` (``MESSAGE``), a JSON logger's own."""
_TIME_KEYS = ("time", "timestamp", "@timestamp")
_TEXT_FIELD = re.compile(rf'^\s{{0,40}}"(?:{"|".join(_TEXT_KEYS)})": ("(?:[^"\\]|\\.)*"),?\s*$')
"""A line's text in an export printed across lines (a JSON array, indented): its field alone on its line."""


def _unwrapped(lines: Iterable[str]) -> Iterator[str]:
    """The lines of a log exported as JSON as the job wrote them (a traceback's frames and exception line
    each its own entry, or one entry holding them all), each after its entry's time where it has one; any
    other line as it is."""
    for line in lines:
        bare = line.strip()
        if bare[:1] == "{" and bare[-1:] == "}":
            yield from _or_line(_entry_lines(bare), line)
        elif bare[:1] == '"' and (field := _TEXT_FIELD.match(line)) is not None:
            yield from _or_line(_text_lines(_decoded(field[1])), line)
        else:
            yield line


def _or_line(lines: list[str] | None, line: str) -> list[str]:
    return [line] if lines is None else lines


def _entry_lines(entry: str) -> list[str] | None:
    found = _decoded(entry)
    if not isinstance(found, dict):
        return None
    payload = found.get("jsonPayload")
    text = next((v for k in _TEXT_KEYS if isinstance(v := found.get(k), str)), None)
    if text is None and isinstance(payload, dict):
        text = payload.get("message")
    at = next((v for k in _TIME_KEYS if isinstance(v := found.get(k), str) and len(v) < 40), None)
    return _text_lines(text, f"{at} " if at else "")


def _decoded(literal: str) -> object:
    try:
        return json.loads(literal)
    except (ValueError, RecursionError):
        return None


def _text_lines(text: object, stamp: str = "") -> list[str] | None:
    """The text's lines, each after the stamp; an entry of no text (a blank line the job printed) one blank line."""
    if not isinstance(text, str):
        return None
    return [f"{stamp}{line}\n" for line in text.rstrip().splitlines()] or ["\n"]


MAX_ERROR_FILE = 1 << 24
"""Characters of a worker's ``error.json`` read: a traceback is kilobytes."""
MAX_ERROR_LINES = 10_000


def _error_file(path: str, text: io.TextIOWrapper) -> list[str] | None:
    """The exception a torchrun worker's ``@record`` wrote to its ``error.json``, as its log shows it: the
    traceback (``py_callstack``) ending in its exception, else the exception alone; None for another file."""
    if os.path.basename(path) != "error.json":
        return None
    try:
        said = json.loads(text.read(MAX_ERROR_FILE))["message"]
        extra = said.get("extraInfo") if isinstance(said, dict) else None
        stack = extra.get("py_callstack") if isinstance(extra, dict) else None
        message = said.get("message") if isinstance(said, dict) else said
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        text.seek(0)
        return None
    found = stack if isinstance(stack, str) and stack else message if isinstance(message, str) else ""
    stamp = _raised_at(extra.get("timestamp") if isinstance(extra, dict) else None)
    return [f"{stamp}{line[:MAX_LINE]}\n" for line in found.splitlines()[:MAX_ERROR_LINES]] or None


def _raised_at(timestamp: object) -> str:
    """``error.json``'s time (seconds since the epoch, a string) as a stamp before its lines: it orders the
    workers' failures."""
    try:
        return f"{datetime.fromtimestamp(int(str(timestamp)[:12]), timezone.utc):%Y-%m-%dT%H:%M:%S}Z "
    except (ValueError, OverflowError, OSError):
        return ""


RESTART = "attempts left; will restart worker group"
"""torchrun's agent as it restarts its workers after they failed (``--max-restarts``): what came before is an
earlier attempt's."""


SUCCEEDED = "(WorkerState.SUCCEEDED)"
"""torchrun's agent once its workers all ended well (``Local worker group finished (WorkerState.SUCCEEDED)``)."""


def _restarts(path: str, until: float) -> tuple[int, int, bool]:
    """How many times torchrun restarted its workers in the log, the line its last attempt starts after, and
    whether that attempt finished well. The line is 0 where the last attempt's lines show no rank failing nor
    waiting (it finished, the paste cut its lines, or they say nothing): then the whole log is judged."""
    count = last = 0
    recovered = False
    with open_regular(path) as raw, _text(raw) as f:
        for number, line in enumerate(_Lines(f, until), 1):
            if RESTART in line:
                count, last, recovered = count + 1, number, False
            elif count and SUCCEEDED in line:
                recovered = True
    if not count:
        return 0, 0, False
    with open_regular(path) as raw, _text(raw) as f:
        tail = read_log(cast(IO[str], islice(_Lines(f, until), last, None)))
    return count, last if tail.failed_or_waited() else 0, recovered


def read_log_file(path: str, log: LogFacts, problems: list[str], named: bool = False) -> int:
    """1 for a job's log (lines of ranks, of the watchdog, of a launcher, NCCL or torch), 0 for
    any other text (an empty file, such as a marker, without a word). A text ``named`` on the
    command line is a log whatever it holds (an excerpt may hold no line the reader knows):
    it is judged, and said to prove nothing."""
    before, raised = log.matched, len(log.unplaced)
    try:
        until = time.monotonic() + MAX_LOG_SECONDS  # for every read of the file together
        restarts, last, recovered = _restarts(path, until)
        times = "once" if restarts == 1 else f"{restarts} times"
        with open_regular(path) as raw, _text(raw) as f:
            lines = _Lines(f, until)
            if last:
                earlier = read_log(cast(IO[str], islice(lines, last)))
                said = earlier.first_failure() or "what failed is not in the log"
                log.restarts.append(
                    f"torchrun restarted the workers {times} ({os.path.basename(path)}): judged on the last attempt; "
                    f"before it, {said}"
                )
                log.matched += earlier.matched
            elif recovered:
                log.restarts.append(
                    f"torchrun restarted the workers {times} ({os.path.basename(path)}) and the last attempt "
                    f"finished {SUCCEEDED}: the job recovered; what failed before it is judged below"
                )
            read_log(cast(IO[str], _of_rank(path, _unwrapped(_error_file(path, f) or lines))), log)  # iterated
            empty = raw.tell() == 0
    except OSError as e:
        problems.append(f"{path}: {why_not(path, e)}")
        return 0
    if lines.cut_short:
        problems.append(f"{path}: not read to its end within {MAX_LOG_SECONDS:.0f} s: the lines read by then are kept")
    if log.matched > before or (named and len(log.unplaced) > raised):
        return 1  # named, an exception no line places is a process's: judged as one
    if not empty and named:
        problems.append(f"{path}: no line of a job's ranks, launcher, NCCL or torch in it: nothing to judge")
        return 1
    if not empty:
        problems.append(f"{path}: text with no watchdog line and no [rankN]: prefix, not a job log")
    return 0
