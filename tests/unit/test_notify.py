"""``--notify`` and ``--on-alert``: alert changes delivered to a real local HTTP server and
to a real shell command, with retries, the flood rule, and a dead receiver that blocks nothing."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distmon.actions.notify import TEXT_LIMIT, Notifications, check_url, payload, site
from distmon.monitor.state.alerts import CRITICAL, WARNING, Alert, AlertBook, Change, Finding
from tests.support.webhook import Receiver, serving

FAST = (0.01, 0.02, 0.04)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as server:
        yield server


def alert(key: str = "hang", ranks: list[int] | None = None, severity: str = CRITICAL, detail: str = "") -> Alert:
    ranks = [5] if ranks is None else ranks
    return Alert("hang", severity, ranks, 1000.0, f"rank {ranks} stuck", detail, key=key)


def finding(ranks: list[int], age: int, severity: str = CRITICAL) -> Finding:
    summary = f"rank {ranks} stuck in all_reduce for {age}s"
    return Finding("hang", "hang", severity, ranks, summary, f"waiting {age}s\nat train.py:42")


def test_payload_is_the_issue_shape_with_one_readable_line():
    a = alert(detail="line one\nline two")
    body = payload("raised", a)
    assert set(body) == {"text", "event", "alert"}
    assert body["event"] == "raised"
    assert body["alert"] == {
        "kind": "hang",
        "severity": "critical",
        "ranks": [5],
        "t": 1000.0,
        "summary": a.summary,
        "detail": "line one\nline two",
    }
    assert body["text"] == "distmon: CRITICAL hang: rank [5] stuck"
    assert payload("resolved", a)["text"] == "distmon: resolved hang: rank [5] stuck"
    assert payload("updated", a)["text"].startswith("distmon: CRITICAL hang (updated): ")
    long = Alert("stall", WARNING, [1], 0.0, "rank 1\nwaits " + "x" * 1000, "")
    line = payload("raised", long)["text"]
    assert "\n" not in line
    assert len(line) == TEXT_LIMIT
    assert line.startswith("distmon: WARNING stall: rank 1 waits xxx")
    assert line.endswith("…")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.slack.com/services/T0/B0/x", True),
        ("http://127.0.0.1:8080/hook", True),
        ("hooks.slack.com/services/x", False),
        ("ftp://example.com/x", False),
        ("https:///path", False),
        ("http://host:port/x", False),
        ("", False),
    ],
)
def test_check_url(url: str, ok: bool):
    error = check_url(url)
    assert (error is None) == ok
    if error:
        assert "\n" not in error
        assert "--notify" in error


def test_logs_name_the_site_not_the_secret_path():
    assert site("https://hooks.slack.com/services/T0/B0/secret") == "https://hooks.slack.com"
    assert site("http://user:pw@127.0.0.1:8080/hook?token=x") == "http://127.0.0.1:8080"


def test_alert_lifecycle_is_told_without_flooding(receiver: Receiver):
    """A standing hang's detail changes every tick: that alone is never a POST."""
    book = AlertBook()
    notes = Notifications(receiver.url, None, backoff=FAST, level=WARNING)
    notes.changes(book.update([finding([5], 0)], now=1.0))
    for age in range(1, 21):
        changes = book.update([finding([5], age)], now=1.0 + age)
        assert [c.event for c in changes] == ["updated"]
        notes.changes(changes)
    notes.changes(book.update([finding([5, 6], 21)], now=22.0))
    notes.changes(book.update([finding([5, 6], 22, severity=WARNING)], now=23.0))
    notes.changes(book.update([finding([5, 6], 23, severity=WARNING)], now=24.0))
    notes.changes(book.update([], now=25.0))
    notes.close(wait=5)
    assert [(b["event"], b["alert"]["ranks"], b["alert"]["severity"]) for b in receiver.bodies] == [
        ("raised", [5], CRITICAL),
        ("updated", [5, 6], CRITICAL),
        ("updated", [5, 6], WARNING),
        ("resolved", [5, 6], WARNING),
    ]
    assert receiver.bodies[0]["text"] == "distmon: CRITICAL hang: rank [5] stuck in all_reduce for 0s"
    assert (notes.sent, notes.failed, notes.dropped) == (4, 0, 0)
    assert notes.summary() == "notifications: 4 sent, 0 failed, 0 dropped"


def test_by_default_only_what_needs_a_person_is_told(receiver: Receiver):
    """Warnings raised and resolved (a pause the job comes out of) are never told; a warning
    that turns critical is told then, as raised, and its resolution with it."""
    book = AlertBook()
    notes = Notifications(receiver.url, None, backoff=FAST)
    for t in range(3):  # a checkpoint the job waits for, three times: a warning each
        notes.changes(book.update([finding([0], 1, severity=WARNING)], now=10.0 * t))
        notes.changes(book.update([], now=10.0 * t + 5))
    notes.changes(book.update([finding([2], 1, severity=WARNING)], now=40.0))
    notes.changes(book.update([finding([2], 2, severity=WARNING)], now=41.0))
    notes.changes(book.update([finding([2], 5)], now=44.0))
    notes.changes(book.update([finding([2], 6)], now=45.0))
    notes.changes(book.update([], now=50.0))
    notes.close(wait=5)
    assert [(b["event"], b["alert"]["ranks"], b["alert"]["severity"]) for b in receiver.bodies] == [
        ("raised", [2], CRITICAL),
        ("resolved", [2], CRITICAL),
    ]


def test_resolved_alerts_are_forgotten(receiver: Receiver):
    notes = Notifications(receiver.url, None, backoff=FAST)
    for i in range(50):
        a = alert(key=f"straggler:{i}")
        notes.changes([Change("raised", a), Change("resolved", a)])
    assert notes._told == {}
    notes.close(wait=5)
    assert notes.sent == 100


def test_tell_is_unconditional(receiver: Receiver):
    """distmon ending a job is news even when severity and ranks stand."""
    notes = Notifications(receiver.url, None, backoff=FAST)
    a = alert()
    notes.changes([Change("raised", a)])
    a.detail = "distmon ended the job: SIGTERM to ranks 0-7"
    notes.tell("updated", a)
    notes.close(wait=5)
    assert [b["event"] for b in receiver.bodies] == ["raised", "updated"]
    assert receiver.bodies[1]["alert"]["detail"].startswith("distmon ended the job")


@pytest.mark.parametrize("status", [500, 503, 429])
def test_server_errors_are_retried_then_delivered(receiver: Receiver, status: int):
    receiver.fail_first, receiver.fail_status = 2, status
    warnings: list[str] = []
    notes = Notifications(receiver.url, None, backoff=FAST, warn=warnings.append)
    notes.changes([Change("raised", alert())])
    notes.close(wait=5)
    assert receiver.requests == 3
    assert [b["event"] for b in receiver.bodies] == ["raised"]
    assert (notes.sent, notes.failed) == (1, 0)
    assert warnings == [f"distmon: notification to {site(receiver.url)} failed: HTTP {status} (retrying)"]


def test_a_client_error_is_not_retried(receiver: Receiver):
    receiver.fail_first, receiver.fail_status = 100, 400
    warnings: list[str] = []
    notes = Notifications(receiver.url, None, backoff=FAST, warn=warnings.append)
    notes.changes([Change("raised", alert(key="a")), Change("raised", alert(key="b"))])
    notes.close(wait=5)
    assert receiver.requests == 2
    assert (notes.sent, notes.failed) == (0, 2)
    assert warnings == [f"distmon: notification to {site(receiver.url)} failed: HTTP 400 (not retried)"]


def test_an_unreachable_webhook_is_given_up_after_the_retries(receiver: Receiver):
    url = receiver.url
    receiver.shutdown()
    receiver.server_close()
    warnings: list[str] = []
    notes = Notifications(url, None, backoff=FAST, warn=warnings.append)
    notes.changes([Change("raised", alert())])
    notes.close(wait=5)
    assert (notes.sent, notes.failed) == (0, 1)
    assert len(warnings) == 1
    assert "refused" in warnings[0].lower()
    assert warnings[0].endswith("(retrying)")


def test_a_webhook_that_never_answers_blocks_nothing(receiver: Receiver):
    receiver.hold.set()
    notes = Notifications(receiver.url, None, backoff=FAST, http_timeout=30)
    start = time.monotonic()
    notes.changes([Change("raised", alert(key=f"k{i}")) for i in range(5)])
    assert time.monotonic() - start < 10, "not the 30 s the webhook would hold it"
    assert receiver.arrived.wait(5)
    start = time.monotonic()
    notes.close(wait=1)
    assert time.monotonic() - start < 10, "not the 30 s the webhook would hold it"
    assert (notes.sent, notes.failed, notes.dropped) == (0, 1, 4)


def test_a_full_queue_drops_the_newest(receiver: Receiver):
    receiver.hold.set()
    notes = Notifications(receiver.url, None, backoff=FAST, queue_limit=2)
    notes.tell("raised", alert(key="k0"))
    assert receiver.arrived.wait(5)
    for i in range(1, 10):
        notes.tell("raised", alert(key=f"k{i}", ranks=[i]))
    assert notes.dropped == 7
    receiver.release.set()
    notes.close(wait=5)
    assert [b["alert"]["ranks"] for b in receiver.bodies] == [[5], [1], [2]]
    assert (notes.sent, notes.failed, notes.dropped) == (3, 0, 7)


def test_on_alert_command_gets_the_json_on_stdin(tmp_path: Path):
    log = tmp_path / "alerts.jsonl"
    notes = Notifications(None, f"cat >> {log}")
    a = alert()
    notes.changes([Change("raised", a), Change("resolved", a)])
    notes.close(wait=5)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == [payload("raised", a), payload("resolved", a)]
    assert (notes.sent, notes.failed) == (2, 0)


def test_webhook_and_command_both_get_each_change(receiver: Receiver, tmp_path: Path):
    log = tmp_path / "alerts.jsonl"
    notes = Notifications(receiver.url, f"cat >> {log}", backoff=FAST)
    notes.changes([Change("raised", alert())])
    notes.close(wait=5)
    assert receiver.bodies == [json.loads(log.read_text())]
    assert notes.sent == 2


def test_a_failing_command_is_counted_and_said_once():
    warnings: list[str] = []
    notes = Notifications(None, "cat > /dev/null; echo 'no such channel' >&2; exit 3", warn=warnings.append)
    notes.changes([Change("raised", alert(key="a")), Change("raised", alert(key="b"))])
    notes.close(wait=5)
    assert (notes.sent, notes.failed) == (0, 2)
    assert len(warnings) == 1
    assert warnings[0].endswith("failed: exit status 3: no such channel (not retried)")


def test_a_command_that_hangs_is_killed_with_its_pipeline(tmp_path: Path):
    pid_file = tmp_path / "pid"
    warnings: list[str] = []
    notes = Notifications(None, f"sleep 60 & echo $! > {pid_file}; wait", command_timeout=6, warn=warnings.append)
    start = time.monotonic()
    notes.changes([Change("raised", alert())])
    assert time.monotonic() - start < 3, "not the 6 s the command holds it"
    notes.close(wait=15)
    assert (notes.sent, notes.failed) == (0, 1)
    assert "timed out after 6 s, killed" in warnings[0]
    assert not running(int(pid_file.read_text()))


def test_nothing_configured_is_nothing_done():
    notes = Notifications(None, None)
    assert not notes
    notes.changes([Change("raised", alert())])
    notes.close(wait=1)
    assert notes.summary() == "notifications: 0 sent, 0 failed, 0 dropped"


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed grandchild may wait for a reaper)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return os.path.exists(f"/proc/{pid}")
