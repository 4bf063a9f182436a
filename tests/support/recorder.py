"""``distmon record`` as a user runs it: a process of its own, its stderr in a file beside
the recording, read while it runs."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from distmon.monitor.recording.format import AlertEvent, received
from distmon.monitor.recording.reader import RecordingError, read_recording
from distmon.wire import Report, decode
from tests.support.commands import DISTMON, distmon
from tests.support.waiting import wait_until


class Printing(Protocol):
    """A job whose output can be read while it runs."""

    @property
    def output(self) -> str: ...


class Recorder:
    """``distmon record --out OUT --endpoint ENDPOINT ARGS...``; its stderr in ``OUT.log``."""

    def __init__(self, out: Path, endpoint: str, *args: str) -> None:
        self.out = out
        self.log = out.with_suffix(".log")
        with self.log.open("w") as err:
            self.process = subprocess.Popen(
                [*DISTMON, "record", "--out", str(out), "--endpoint", endpoint, *args],
                stderr=err,
                text=True,
            )

    def stderr(self) -> str:
        return self.log.read_text()

    def wait_listening(self, timeout: float = 60) -> Recorder:
        """Until it says it listens: the monitor first, then the job, as on a cluster."""
        wait_until(lambda: "listening on" in self.stderr() or self.process.poll() is not None, timeout, "the recorder")
        assert self.process.poll() is None, self.stderr()
        return self

    def wait_recorded(self, what: str, seen: Callable[[list[Report]], bool], timeout: float = 60) -> None:
        """Until the reports recorded so far (a recording reads while it is written) satisfy ``seen``."""
        wait_until(lambda: seen(self.reports()), timeout, what)

    def reports(self) -> list[Report]:
        """The reports recorded so far, in order."""
        return [decode(frame) for _, frame in received(read_recording(str(self.out))[1])]

    def wait_critical(self, kind: str, timeout: float, job: Printing | None = None) -> None:
        """Until its stderr shows a ``kind`` alert critical (raised so, or a warning turned so:
        a culprit is a warning while the monitor still looks at its process). Where it does not,
        the failure shows what the recorder said and, given the ``job``, what the job printed."""

        def critical() -> bool:
            return any(f" {kind}: " in line and " CRITICAL " in line for line in self.stderr().splitlines())

        try:
            wait_until(critical, timeout, f"a critical {kind} alert")
        except AssertionError as e:
            printed = f"\nthe job printed:\n{job.output[-3000:]}" if job is not None else ""
            raise AssertionError(f"{e}; the recorder said:\n{self.stderr()[-3000:]}{printed}") from None

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> str:
        """Stop it as a batch system (SIGTERM) or a person (SIGINT) would; its stderr."""
        self.process.send_signal(sig)
        assert self.process.wait(30) == 0, self.stderr()
        return self.stderr()

    def alerts(self) -> list[dict]:
        """Stop it as a person would (Ctrl-C); the alerts of its recording, as
        ``distmon report --json`` gives them."""
        self.stop(signal.SIGINT)
        report = distmon("report", self.out, "--json", check=True)
        alerts: list[dict] = json.loads(report.stdout)
        return alerts

    def kill(self) -> None:
        """For a test that failed before it could stop the recorder."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextmanager
def recording(out: Path, endpoint: str, *args: str, preexec_fn: Callable[[], None] | None = None) -> Iterator[Recorder]:
    """A recorder, listening, killed if the test did not stop it."""
    recorder = Recorder(out, endpoint, *args)
    try:
        yield recorder.wait_listening()
    finally:
        recorder.kill()


def alert_detail(recording: Path, kind: str) -> str:
    """The latest detail of the ``kind`` alert in a recording read while it is written;
    empty before one, or before the file is there."""
    try:
        _, records = read_recording(str(recording))
        details = [r.alert.detail for r in records if isinstance(r, AlertEvent) and r.alert.kind == kind]
    except RecordingError:
        return ""
    return details[-1] if details else ""
