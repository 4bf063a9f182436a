"""The rank sends facts, the monitor judges (issue 42): whether a rank's exception is a
consequence (a peer or a DataLoader worker went away first) is decided by the monitor as the
report comes in (:mod:`distmon.monitor.state.consequences`), the same for frames straight from
ranks, a relay's columns and a recording replayed; a rank's frame no longer says it, and the
bit 128 old ranks set changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from distmon import wire
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.state import JobState, consequences
from distmon.monitor.state.limits import LIMITS
from distmon.wire import ExceptionInfo
from distmon.wire.column_batch import column_frames, decode_columns
from tests.support.relayed import SimRelays, relayed
from tests.support.simulate import CONNECTION_CLOSED, SimJob

UNTIL = 15
OLD_CONSEQUENCE = 128
"""The header bit ranks before issue 42 set on an exception that said a peer or a worker went."""

Verdicts = dict[int, tuple[bool, bool]]


def faulty(kind: str) -> tuple[SimJob, Verdicts]:
    """A job of 8 ranks whose rank 3 raises (on its own, or on losing a DataLoader worker), the
    others then raising on losing it; and each rank's verdict: (lost a peer, lost a worker)."""
    sim = SimJob(world=8)
    sim = sim.exception(3, at=5) if kind == "exception" else sim.worker_kill(3, at=5)
    expected = {rank: (True, False) for rank in range(8)}
    expected[3] = (False, kind == "worker_kill")
    return sim, expected


def verdicts(state: JobState) -> Verdicts:
    """Each rank that raised: (lost a peer, lost a worker)."""
    return {s.rank: (s.lost_a_peer(), s.lost_a_worker()) for s in state.views(state.flagged(wire.FLAG_RAISED))}


def as_old_ranks_sent(raw: bytes, everywhere: bool = False) -> bytes:
    """``raw`` with bit 128 set where a rank before issue 42 set it (an exception that says a peer
    or a worker went), or, ``everywhere``, on every exception."""
    report = wire.decode(raw)
    said = report.exception.message if report.exception is not None else None
    if said is None or not (everywhere or wire.PEER_LOST.search(said) or wire.WORKER_DIED.search(said)):
        return raw
    return raw[:1] + bytes([raw[1] | OLD_CONSEQUENCE]) + raw[2:]


def straight(stream: Iterable[tuple[float, bytes]]) -> JobState:
    state = JobState(LIMITS)
    for t, raw in stream:
        state.ingest(raw, t)
    return state


def through_relays(sim: SimJob, stream: Iterable[tuple[float, bytes]]) -> JobState:
    """``stream`` as two relays send it, each batch over the wire as columns."""
    state = JobState(LIMITS)
    for record in relayed(stream, SimRelays(2, sim.world), sim.start, until=UNTIL):
        state.ingest_batch(decode_columns(column_frames(record.batch)), record.t)
    return state


def replayed(sim: SimJob, stream: Iterable[tuple[float, bytes]], tmp_path: Path, columns: bool) -> JobState:
    """``stream`` recorded (as frames, or as the relays' columns) and read back."""
    path = str(tmp_path / f"{'columns' if columns else 'frames'}.distmon")
    writer = RecordingWriter(path)
    if columns:
        for record in relayed(stream, SimRelays(2, sim.world), sim.start, until=UNTIL):
            writer.batch(record.t, record.batch)
    else:
        for t, raw in stream:
            writer.message(t, raw)
    writer.close()
    return load_recording(path).state


WAYS: dict[str, Callable[[SimJob, list[tuple[float, bytes]], Path], JobState]] = {
    "straight": lambda sim, stream, tmp: straight(stream),
    "through relays": lambda sim, stream, tmp: through_relays(sim, stream),
    "replayed frames": lambda sim, stream, tmp: replayed(sim, stream, tmp, columns=False),
    "replayed columns": lambda sim, stream, tmp: replayed(sim, stream, tmp, columns=True),
}


def test_a_ranks_frame_says_it_raised_never_why() -> None:
    """A rank that raised on losing a peer says it raised; whether that is a consequence is not
    its to say."""
    sim = SimJob(world=2)
    report = sim.report(1, sim.start + 1)
    assert report is not None
    lost = ExceptionInfo("RuntimeError", CONNECTION_CLOSED, None, [], sim.start + 1)
    raw = wire.encode(replace(report, exception=lost))
    flags = raw[1]
    assert flags & wire.FLAG_RAISED and not flags & OLD_CONSEQUENCE


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("kind", ["exception", "worker_kill"])
def test_the_monitor_tells_a_consequence_from_the_first_cause(kind: str, way: str, tmp_path: Path) -> None:
    """Rank 3 raises (on its own, or on losing a DataLoader worker) and the others on losing it:
    taken in straight, through relays, or replayed from a recording of either, the monitor
    judges each exception alike, and names rank 3 as the one that failed."""
    sim, expected = faulty(kind)
    state = WAYS[way](sim, list(sim.stream(until=UNTIL)), tmp_path)
    assert verdicts(state) == expected
    ending = state.ending([])
    assert ending is not None and ending.words == "failed: rank 3 raised an exception"


@pytest.mark.parametrize("way", WAYS)
def test_an_old_ranks_bit_128_is_read_as_the_monitor_judges(way: str, tmp_path: Path) -> None:
    """Frames from ranks before issue 42, with bit 128 on the exceptions they judged
    consequences, read as the new ones; the monitor ignores the bit, so set on the first cause
    too it changes nothing."""
    sim, expected = faulty("exception")
    for everywhere in (False, True):
        stream = [(t, as_old_ranks_sent(raw, everywhere)) for t, raw in sim.stream(until=UNTIL)]
        assert any(raw[1] & OLD_CONSEQUENCE for _, raw in stream)
        assert verdicts(WAYS[way](sim, stream, tmp_path)) == expected


def test_a_report_is_decoded_for_its_verdict_only_when_its_rank_newly_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that raised and goes on reporting is judged once, not a report; healthy ranks
    never; a rank that stops raising and raises again, once more."""
    judged: list[bytes | None] = []

    def judge(raw: bytes | None) -> int:
        judged.append(raw)
        return real(raw)

    real = consequences.judge_exception
    monkeypatch.setattr(consequences, "judge_exception", judge)
    sim = SimJob(world=64)
    state = JobState(LIMITS)
    lost = ExceptionInfo("RuntimeError", CONNECTION_CLOSED, None, [], sim.start)
    for k in range(20):
        t = sim.start + k
        for rank in range(64):
            report = sim.report(rank, t)
            assert report is not None
            raised = rank == 5 and not 10 <= k < 12
            assert state.apply(replace(report, exception=lost) if raised else report, t)
    assert len(judged) == 2 and state.ranks[5].lost_a_peer()
    assert np.flatnonzero(state.consequences(consequences.LOST_PEER | consequences.LOST_WORKER)).tolist() == [5]
