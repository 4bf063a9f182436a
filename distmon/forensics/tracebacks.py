"""Python tracebacks and torchrun's failure table, read line by line from a log.

A traceback is read to its exception line and the lines of the message that follow it (the
``Original exception:`` of a monitored barrier says what the rank waited for). One the paste
cut before its header starts at its first frame; one cut before its exception line still says
the rank raised (:attr:`Raised.cut`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field

from distmon.guards.text import visible
from distmon.wire import StackFrame

MAX_FRAMES = 64
MAX_TRACEBACK_LINES = 4096
"""Lines a traceback may run without its exception line before it is given up (its innermost
:data:`MAX_FRAMES` frames are kept)."""
MAX_MESSAGE_LINES = 8
"""Lines of an exception's message read after its first."""
SIGABRT = -6
"""torchrun's exit code of a rank its own watchdog aborted: a timeout's consequence, not a cause."""
SIGTERM = -15
"""torchrun's exit code of a rank it tore down after another failed."""

TRACEBACK = "Traceback (most recent call last):"
FRAME = re.compile(r' {2}File "([^"]{1,1000})", line (\d{1,9}), in (.{1,200})')
_EXCEPTION = re.compile(r"([A-Za-z_][\w.]{0,200})(?:: ?(.*))?")
_BARE_EXCEPTIONS = ("Error", "Exception", "Interrupt", "Exit", "Iteration")
"""How the names of exceptions raised without a message end: a lone word of the rank's own
output between its frames is not one."""
_NOT_MESSAGE = re.compile(r"\s*(?:$|\[[EWIF]\d{0,4}[ \d]|Traceback|File \"|During handling|The above exception)")
"""What ends an exception's message: a blank line, a glog line, the next traceback."""
ROOT_CAUSE = "Root Cause (first observed failure):"
_TABLE_FIELD = re.compile(r"\s{0,8}(rank|exitcode|time|traceback)\s{0,8}: ?(.*)")
_TABLE_END = "=" * 20
_SIGNAL = re.compile(r"Signal (\d{1,3}) \((SIG\w{1,10})\)")
ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")


@dataclass
class Raised:
    """A rank's last words: the exception its traceback ended in."""

    type: str
    message: str
    frames: list[StackFrame]
    at: float | None
    """The time the log gives it (its own stamp, else the last one before it), if any."""
    cut: bool = False
    """The log holds its frames, not its exception line."""
    more: list[str] = field(default_factory=list)
    """The lines of its message after the first."""

    @property
    def said(self) -> str:
        """Its whole message, as the exception's text would be."""
        return "\n".join([self.message, *self.more])


@dataclass
class Traceback:
    """A Python traceback read line by line, up to its exception line, then its message."""

    frames: list[StackFrame] = field(default_factory=list)
    lines: int = 0
    raised: Raised | None = None
    """Once its exception line is read: the lines after it carry on its message."""
    closed: bool = False

    def line(self, body: str, stamp: float | None) -> Raised | None:
        """The exception, on its line; None before it and after it."""
        self.lines += 1
        if self.raised is not None:
            self._message(body)
            return None
        frame = FRAME.match(body)
        if frame:
            if len(self.frames) == MAX_FRAMES:
                del self.frames[0]
            file, line, func = frame.groups()
            self.frames.append(StackFrame(visible(file), int(line), visible(func.strip(), 200)))
            return None
        if not body.strip() or body[:1].isspace():
            if self.frames and self.frames[-1].code is None and body.startswith("    "):
                code = body.strip()
                if code.strip("^~ "):
                    self.frames[-1].code = visible(code)
            return None
        exception = _EXCEPTION.fullmatch(body.rstrip())
        if exception is None or (exception.group(2) is None and not exception.group(1).endswith(_BARE_EXCEPTIONS)):
            return None
        message = visible((exception.group(2) or "").strip())
        self.raised = Raised(visible(exception.group(1), 200), message, self.frames, stamp)
        return self.raised

    @property
    def done(self) -> bool:
        """Its message is over, or it ran too long without an exception line."""
        if self.raised is not None:
            return self.closed or len(self.raised.more) >= MAX_MESSAGE_LINES
        return self.lines > MAX_TRACEBACK_LINES

    def _message(self, body: str) -> None:
        assert self.raised is not None
        if _NOT_MESSAGE.match(body) or FRAME.match(body):
            self.closed = True
        else:
            self.raised.more.append(visible(body.strip()))

    def cut(self, stamp: float | None) -> Raised | None:
        """What a traceback the log ends or breaks off before its exception line says: the
        rank raised, in these frames."""
        if self.raised is not None or not self.frames:
            return None
        return Raised("an exception", "its exception line is not in the log", self.frames, stamp, cut=True)


@dataclass
class Table:
    """The root cause block of torchrun's failure table."""

    rank: int | None = None
    exitcode: int | None = None
    at: float | None = None
    traceback: Traceback | None = None
    raised: Raised | None = None
    said: str = ""
    lines: int = 0

    def line(self, body: str) -> None:
        self.lines += 1
        if self.traceback is not None:
            if self.raised is None:
                self.raised = self.traceback.line(body[2:] if body.startswith("  ") else body, self.at)
            return
        found = _TABLE_FIELD.match(body)
        if found is None:
            return
        key, value = found.groups()
        number = re.match(r"-?\d{1,9}", value)
        if key == "rank" and number:
            self.rank = int(number.group())
        elif key == "exitcode" and number:
            self.exitcode = int(number.group())
        elif key == "time" and (iso := ISO.match(value)):
            self.at = utc(*iso.groups())
        elif key == "traceback":
            self.said = visible(value.strip())
            if value.startswith(TRACEBACK):
                self.traceback = Traceback()

    @property
    def done(self) -> bool:
        return self.lines > MAX_TRACEBACK_LINES

    def failure(self, timed_out: bool) -> Raised | None:
        """The root cause as last words: the exception it raised, or the signal that killed
        it. None for a rank its own watchdog aborted or torchrun tore down, or one that timed
        out like its peers and left only an exit code: torchrun observed it first, no more."""
        if self.raised is not None:
            return self.raised
        if timed_out or self.exitcode is None or self.exitcode in (0, SIGABRT, SIGTERM):
            return None
        signal = _SIGNAL.search(self.said)
        if self.exitcode < 0 or signal:
            kind = f"Signal {signal.group(1)} ({signal.group(2)})" if signal else f"Signal {-self.exitcode}"
            return Raised(kind, "killed: torchrun's first observed failure", [], self.at)
        return Raised(
            "Exception",
            f"exit code {self.exitcode}, torchrun's first observed failure (its traceback not in the log)",
            [],
            self.at,
        )


def ends_table(body: str) -> bool:
    return body.strip().startswith(_TABLE_END)


def utc(year: int | str, *parts: str | None) -> float | None:
    month, day, hour, minute, second, fraction = parts
    try:
        whole = calendar.timegm(
            (int(year), int(month or 0), int(day or 0), int(hour or 0), int(minute or 0), int(second or 0), 0, 0, 0)
        )
    except (OverflowError, ValueError):
        return None
    return whole + (float("0." + fraction) if fraction else 0.0)
