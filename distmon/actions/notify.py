"""Alert notifications: each alert change worth a person's attention, POSTed as JSON to a
webhook (``--notify URL``) and piped to a command (``--on-alert CMD``).

A page is for what needs a person: by default only critical alerts are told (an alert
raised as a warning is told when it turns critical, as raised), and their resolution;
``--notify-level warning`` tells warnings too.

Delivery runs on one daemon thread per sink behind a bounded queue, so a slow or dead
receiver never blocks ingest or the UI and never keeps the process from exiting. Only
changes a person would act on are told: an alert's detail (and often its summary) carries
durations that change every tick, and a POST per tick would flood a channel.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from distmon.monitor.state.alerts import CRITICAL, WARNING, Alert, Change

TEXT_LIMIT = 300
"""Characters of the one-line ``text``; the full story is in ``alert.detail``."""
QUEUE_LIMIT = 100
BACKOFF = (1.0, 2.0, 4.0, 8.0)
"""Seconds before each webhook retry; after the last one the change is given up."""
HTTP_TIMEOUT = 5.0
COMMAND_TIMEOUT = 30.0
MAX_REMEMBERED = 10_000
"""Alerts whose last told state is kept; resolved ones are forgotten at once."""
LEVELS = (CRITICAL, WARNING)
"""What ``--notify-level`` takes: the least severity told."""


def payload(event: str, alert: Alert) -> dict[str, Any]:
    """The JSON of one change. ``text`` is what Slack and Mattermost incoming webhooks show."""
    return {"text": chat_line(event, alert), "event": event, "alert": alert.to_json()}


def chat_line(event: str, alert: Alert) -> str:
    """One line a person reads in a chat channel, e.g. ``distmon: CRITICAL hang: rank 5 ...``."""
    if event == "resolved":
        head = f"resolved {alert.kind}"
    elif event == "updated":
        head = f"{alert.severity.upper()} {alert.kind} (updated)"
    else:
        head = f"{alert.severity.upper()} {alert.kind}"
    line = " ".join(f"distmon: {head}: {alert.summary}".split())
    return line if len(line) <= TEXT_LIMIT else line[: TEXT_LIMIT - 1] + "…"


def check_url(url: str) -> str | None:
    """A one-line error for a ``--notify`` URL that cannot be POSTed to, else None."""
    try:
        parts = urllib.parse.urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a port that is not a number
        valid = False
    if not valid:
        return f"--notify needs an http:// or https:// URL with a host, not {url!r}"
    return None


def site(url: str) -> str:
    """The URL's scheme and host only, for logs: a webhook's path is often its secret."""
    parts = urllib.parse.urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


class Notifications:
    """The one object a monitor command holds: decides which changes to tell, and tells them."""

    def __init__(
        self,
        url: str | None,
        command: str | None,
        *,
        backoff: Iterable[float] = BACKOFF,
        http_timeout: float = HTTP_TIMEOUT,
        command_timeout: float = COMMAND_TIMEOUT,
        queue_limit: int = QUEUE_LIMIT,
        warn: Callable[[str], None] | None = None,
        level: str = CRITICAL,
    ) -> None:
        """A webhook retries after each ``backoff`` delay; a command is not retried (it may have
        done half its work). ``warn`` gets one line per sink on its first failure (default:
        stderr). ``level``: the least severity told, one of :data:`LEVELS`."""
        warn = warn or _to_stderr
        self.level = level
        self.sinks: list[Sink] = []
        if url:
            deliver = functools.partial(post, url, http_timeout)
            self.sinks.append(Sink(site(url), deliver, tuple(backoff), queue_limit, warn))
        if command:
            run = functools.partial(run_command, command, command_timeout)
            self.sinks.append(Sink(f"--on-alert command {command!r}", run, (), queue_limit, warn))
        self._told: dict[str, tuple[str, list[int]]] = {}

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def changes(self, changes: list[Change]) -> None:
        """Tell every alert raised at the level or above, its updates when its severity or
        ranks moved, and its resolution; an alert below the level is told, as raised, once it
        reaches it, and only a resolution told before is told."""
        for change in changes:
            alert = change.alert
            told = self._told.get(alert.key)
            if change.event == "resolved":
                if told is not None or self.level == WARNING:
                    self.tell("resolved", alert)
            elif (alert.severity == CRITICAL or self.level == WARNING) and told != (alert.severity, alert.ranks):
                self.tell("raised" if told is None else change.event, alert)

    def tell(self, event: str, alert: Alert) -> None:
        """Queue one change unconditionally; never blocks."""
        if not self.sinks:
            return
        self._told.pop(alert.key, None)
        if event != "resolved":
            self._told[alert.key] = (alert.severity, list(alert.ranks))
            if len(self._told) > MAX_REMEMBERED:
                del self._told[next(iter(self._told))]
        body = json.dumps(payload(event, alert)).encode() + b"\n"
        for sink in self.sinks:
            sink.put(body)

    def close(self, wait: float) -> None:
        """Deliver what is queued within ``wait`` seconds in all, then stop; the rest is dropped."""
        deadline = time.monotonic() + wait
        for sink in self.sinks:
            sink.begin_close(deadline)
        for sink in self.sinks:
            sink.finish_close(deadline)

    @property
    def sent(self) -> int:
        return sum(s.sent for s in self.sinks)

    @property
    def failed(self) -> int:
        return sum(s.failed for s in self.sinks)

    @property
    def dropped(self) -> int:
        return sum(s.dropped for s in self.sinks)

    def summary(self) -> str:
        """For the command's closing line, e.g. ``notifications: 3 sent, 0 failed, 0 dropped``."""
        return f"notifications: {self.sent} sent, {self.failed} failed, {self.dropped} dropped"


class DeliveryError(Exception):
    """One failed attempt; ``retry`` says whether trying again may help."""

    def __init__(self, reason: str, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


class Sink:
    """One destination: a bounded queue drained in order by its own daemon thread.

    Counters: ``sent`` delivered; ``failed`` given up after trying, or still being tried
    when closing ran out of time; ``dropped`` never tried (queue full, or still queued at close).
    """

    def __init__(
        self,
        name: str,
        deliver: Callable[[bytes], None],
        backoff: tuple[float, ...],
        queue_limit: int,
        warn: Callable[[str], None],
    ) -> None:
        """``deliver`` makes one attempt and raises DeliveryError; ``backoff`` holds the delays of the retries."""
        self.name = name
        self.sent = self.failed = self.dropped = 0
        self._deliver = deliver
        self._backoff = backoff
        self._limit = queue_limit
        self._warn = warn
        self._warned = False
        self._queue: deque[bytes] = deque()
        self._busy = False
        self._deadline: float | None = None
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="distmon-notify", daemon=True)
        self._thread.start()

    def put(self, body: bytes) -> None:
        with self._cond:
            if self._deadline is not None or len(self._queue) >= self._limit:
                self.dropped += 1
                return
            self._queue.append(body)
            self._cond.notify()

    def begin_close(self, deadline: float) -> None:
        with self._cond:
            self._deadline = deadline
            self._cond.notify_all()

    def finish_close(self, deadline: float) -> None:
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            self._closed = True
            self.dropped += len(self._queue)
            self._queue.clear()
            if self._busy:
                self.failed += 1
                self._busy = False

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and self._deadline is None:
                    self._cond.wait()
                if not self._queue:
                    return
                body = self._queue.popleft()
                self._busy = True
            delivered = self._attempts(body)
            with self._cond:
                if self._closed:
                    return
                self._busy = False
                if delivered:
                    self.sent += 1
                else:
                    self.failed += 1

    def _attempts(self, body: bytes) -> bool:
        """Try, then retry after each backoff delay while it may help and closing leaves time."""
        for delay in (*self._backoff, None):
            try:
                self._deliver(body)
                return True
            except DeliveryError as e:
                retry = e.retry and delay is not None
                self._warn_once(f"{e.reason} ({'retrying' if retry else 'not retried'})")
                if not retry or delay is None or not self._sleep(delay):
                    return False
        return False

    def _sleep(self, delay: float) -> bool:
        """Wait ``delay`` seconds; False when closing's deadline would pass first."""
        end = time.monotonic() + delay

        def too_late() -> bool:
            return self._deadline is not None and end > self._deadline

        with self._cond:
            return not self._cond.wait_for(too_late, timeout=delay)

    def _warn_once(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            self._warn(f"distmon: notification to {self.name} failed: {what}")


def post(url: str, timeout: float, body: bytes) -> None:
    """One webhook attempt. Server errors, 429 and network errors may pass; other HTTP errors will not."""
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", "User-Agent": "distmon"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as e:
        raise DeliveryError(f"HTTP {e.code}", retry=e.code == 429 or e.code >= 500) from e
    except urllib.error.URLError as e:
        raise DeliveryError(str(e.reason), retry=True) from e
    except (OSError, ValueError) as e:
        raise DeliveryError(str(e) or type(e).__name__, retry=True) from e


def run_command(command: str, timeout: float, body: bytes) -> None:
    """One ``--on-alert`` run, through the shell (users write pipelines like ``jq . >> alerts.log``).

    Its stdout is discarded and its stderr kept for the failure line: under ``watch`` either
    would write over the screen. It runs in its own session so that a timeout kills the whole
    pipeline, not only the shell.
    """
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        raise DeliveryError(str(e), retry=False) from e
    with process:
        try:
            _, err = process.communicate(body, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise DeliveryError(f"timed out after {timeout:g} s, killed", retry=False) from e
    if process.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        because = f": {said[-1][:200]}" if said else ""
        code = process.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        raise DeliveryError(how + because, retry=False)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
