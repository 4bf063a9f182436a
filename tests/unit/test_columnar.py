"""A relay's columns (distmon/wire/column_batch.py, issue 41): the same facts as the frames they carry,
each rank's report whole only when it has news, what does not fit refused and counted, and
recordings of them replaying to the same alerts."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distmon import wire
from distmon.export.html import read_series
from distmon.monitor.attach.feed import AttachedFeed
from distmon.monitor.attach.follow import AttachedMonitor
from distmon.monitor.attach.serve import AttachServer
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.batches import stored_batch
from distmon.monitor.recording.format import ColumnRecord, MessageRecord
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.monitor.state import JobState
from distmon.monitor.state.columns import METRICS, Columns, History
from distmon.monitor.state.limits import LIMITS
from distmon.node.news import WATCH, News
from distmon.wire import Report, WireError
from distmon.wire.arrays import HEADER, parse
from distmon.wire.column_batch import (
    ColumnBatch,
    assemble_columns,
    column_frames,
    decode_columns,
    pieces,
    shuffled,
    unshuffled,
)
from distmon.wire.sockets import DETAILS, Batch, Relay
from tests.support.relayed import SimRelays, relayed
from tests.support.simulate import Layout, SimJob, drive
from tests.support.waiting import wait_until

RELAY = Relay("node-a:7", "node-a")
KEPT_APART = {"via", "bytes", "report_t", "seq"}
"""Columns that say how a number came, not what it is."""


def columns_of(frames: list[bytes], relay: Relay = RELAY, news: News | None = None, now: float = 0.0) -> ColumnBatch:
    """``frames`` as a relay sends them."""
    batch = Batch.of(frames, relay=relay)
    parsed = parse(batch)
    send = (news or News()).choose(parsed, now)
    return ColumnBatch.of(parsed, send, batch.relays)


def seconds_of(sim: SimJob, until: int) -> list[list[bytes]]:
    """The frames of each second of ``sim``."""
    seconds: list[list[bytes]] = [[] for _ in range(until)]
    for t, raw in sim.stream(until=until):
        seconds[min(until - 1, int(t - sim.start))].append(raw)
    return seconds


def same_columns(a: Columns, b: Columns) -> list[str]:
    """The columns (and histories) that differ."""
    differ = []
    for name in (*Columns.SCALARS, *Columns.GROUP_FIELDS, *Columns.CHANNEL_FIELDS):
        x, y = getattr(a, name), getattr(b, name)
        if name not in KEPT_APART and not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            differ.append(name)
    ranks = np.flatnonzero(a.present).tolist()
    differ += [
        m
        for m in METRICS
        if not all(np.array_equal(History(a, r).series(m), History(b, r).series(m), equal_nan=True) for r in ranks)
    ]
    return differ


# --- the same facts --------------------------------------------------------------------------


def test_a_relays_columns_land_in_the_columns_the_frames_fill() -> None:
    """A pipeline job (every rank in three groups, with point-to-point channels), one rank
    hanging: its frames taken in straight and as a relay's columns, second by second, at the
    same times. Every column and history is the same, and every rank's report reads the same
    where its frame carries the numbers."""
    sim = SimJob(world=64, layout=Layout(tp=4, pp=4)).hang(21, at=6)
    straight, through = JobState(LIMITS), JobState(LIMITS)
    news = News()
    for k, frames in enumerate(seconds_of(sim, 12)):
        now = sim.start + k + 1
        straight.ingest_batch(Batch.of(frames), now)
        decoded = decode_columns(column_frames(columns_of(frames, news=news, now=now)))
        through.ingest_batch(decoded, now)
    assert straight.received == through.received == 64 * 12
    assert same_columns(straight.cols, through.cols) == []
    assert (through.cols.via[:64] == 0).all() and through.relays == [RELAY]
    for rank in (0, 5, 21, 22, 63):
        a, b = straight.report_of(rank), through.report_of(rank)
        for name in ("t", "n", "steps", "forwards", "stalled_since", "last_step_t", "data_wait", "pid", "host"):
            assert getattr(a, name) == getattr(b, name), (rank, name)
        assert [(g.id, g.enqueued, g.completed, g.since) for g in a.groups] == [
            (g.id, g.enqueued, g.completed, g.since) for g in b.groups
        ]
        assert [(c.peer, c.posted, c.completed, c.blocked) for c in a.p2p] == [
            (c.peer, c.posted, c.completed, c.blocked) for c in b.p2p
        ]
        assert a.memory is not None and b.memory is not None and a.memory.rss == b.memory.rss
    assert through.report_of(21).stack == straight.report_of(21).stack, "its stalling went whole"
    assert through.report_of(21) == straight.report_of(21)


@pytest.mark.parametrize(
    "fault",
    [
        lambda s: s.hang(37, at=8),
        lambda s: s.exception(12, at=8),
        lambda s: s.kill(50, at=8),
        lambda s: s.worker_kill(9, at=8),
        lambda s: s.extra_collective(3, at=8),
    ],
    ids=["hang", "exception", "kill", "worker_kill", "extra_collective"],
)
def test_the_monitor_names_the_same_culprits_through_relays(fault) -> None:  # type: ignore[no-untyped-def]
    """The same simulated job fed to a monitor straight and through two relays (their
    batches a second each): the same alerts raised and resolved, on the same ranks."""
    sim = fault(SimJob(world=64, layout=Layout(tp=8, pp=2)))
    straight = [(c.event, c.alert.kind, c.alert.severity, c.alert.ranks) for _, c in drive(sim, Monitor(), 30)]
    records = relayed(sim.stream(until=30), SimRelays(2, 64), sim.start, until=30)
    session = Session(ReplayFeed(records, speed=math.inf, end=sim.start + 30), Monitor())
    through = [(c.event, c.alert.kind, c.alert.severity, c.alert.ranks) for _, c in session.drain()]
    assert straight and [c for c in through if c[0] != "updated"] == [c for c in straight if c[0] != "updated"]


def test_a_recording_of_columns_replays_and_reports_as_it_ran(tmp_path: Path) -> None:
    """A monitor recording what two relays send while a rank hangs: the recording holds their
    columns (``n`` records); replayed, it raises the very alerts, at the very times; read back
    for ``distmon report``, the same job at its end."""
    sim = SimJob(world=32).hang(7, at=6)
    out = tmp_path / "columns.distmon"
    live = Monitor(recorder=RecordingWriter(str(out)))
    records = relayed(sim.stream(until=20), SimRelays(2, 32), sim.start, until=20)
    session = Session(ReplayFeed(records, speed=math.inf, end=sim.start + 20), live)
    said = [(t, c.event, c.alert.kind, c.alert.ranks) for t, c in session.finish()]
    session.close()
    header, stored = read_recording(str(out))
    kinds = {type(r).__name__ for r in stored}
    assert header["version"] == 3 and "ColumnRecord" in kinds and "BatchRecord" not in kinds
    assert any(kind == "hang" and ranks == [7] for _, _, kind, ranks in said)
    replayed = Session(ReplayFeed(str(out), speed=math.inf), Monitor())
    again = [(t, c.event, c.alert.kind, c.alert.ranks) for t, c in replayed.finish()]
    assert [change for change in again if change[0] <= said[-1][0]] == said
    pm = load_recording(str(out))
    assert pm.state.received == live.state.received == 32 * 20
    assert same_columns(pm.state.cols, live.state.cols) == []
    assert [a.kind for a in pm.alerts] == [kind for _, event, kind, _ in said if event == "raised"]


def test_old_recordings_of_frames_still_replay_beside_the_new(tmp_path: Path) -> None:
    """A recording of frames (as every recording was before relays sent columns; the real
    version 1 and 2 files in tests/data replay in test_record_report.py) and the same job
    recorded from relays: the same job read back."""
    sim = SimJob(world=16).hang(3, at=5)
    frames = RecordingWriter(str(tmp_path / "frames.distmon"))
    for t, raw in sim.stream(until=15):
        frames.message(t, raw)
    frames.close()
    columns = RecordingWriter(str(tmp_path / "columns.distmon"))
    for record in relayed(sim.stream(until=15), SimRelays(1, 16), sim.start, until=15):
        columns.batch(record.t, record.batch)
    columns.close()
    old, new = load_recording(str(tmp_path / "frames.distmon")), load_recording(str(tmp_path / "columns.distmon"))
    assert old.first_cause is None or old.first_cause.ranks == [3]
    assert {r: s.report.steps for r, s in old.state.ranks.items()} == {
        r: s.report.steps for r, s in new.state.ranks.items()
    }


# --- only news goes whole --------------------------------------------------------------------


def test_a_rank_report_goes_whole_only_with_news_when_asked_or_now_and_then() -> None:
    sim = SimJob(world=4)
    news = News(refresh=100.0, seed=1)
    stalled = {"stalled_since": sim.start + 5, "stack": [wire.StackFrame("train.py", 7, "step")]}

    def sent(t: float, now: float) -> list[int]:
        reports = [sim.report(rank, sim.start + t) for rank in range(4)]
        if t >= 7:
            reports[2] = dataclasses.replace(reports[2], **stalled)  # type: ignore[type-var, arg-type]
        frames = [wire.encode(r) for r in reports if r is not None]
        return np.flatnonzero(news.choose(parse(Batch.of(frames)), now)).tolist()

    assert sent(1, 1) == [0, 1, 2, 3], "the first report of each"
    assert sent(2, 2) == [], "nothing new"
    assert sent(7, 3) == [2], "rank 2 stalled: its flags and stack"
    assert sent(8, 4) == []
    news.watch([1], 4.5)
    assert sent(9, 5) == [1] and sent(10, 5 + WATCH) == [], "asked for, as long as the monitor watches"
    news.unsent(np.array([3]))
    assert sent(11, 10) == [3], "its whole report was in a batch that did not go"
    assert sent(12, 200) == [0, 1, 2, 3], "now and then: within the refresh"


def test_a_ranks_second_report_in_one_batch_goes_whole_only_if_it_has_news() -> None:
    sim = SimJob(world=2).hang(1, at=3)
    first = [wire.encode(sim.report(r, sim.start + 1)) for r in range(2)]  # type: ignore[arg-type]
    later = [wire.encode(sim.report(r, sim.start + 2)) for r in range(2)]  # type: ignore[arg-type]
    stalled = wire.encode(sim.report(1, sim.start + 9))  # type: ignore[arg-type]
    send = News().choose(parse(Batch.of([*first, *later, stalled])), 0.0)
    assert send.tolist() == [True, True, False, False, True]


# --- a monitor started late -------------------------------------------------------------------


def test_a_monitor_started_late_knows_the_ranks_at_once_and_asks_for_their_reports() -> None:
    """The relays have sent every report whole already: the monitor restarted gets numbers
    alone. It follows the job, knows every rank by its numbers, asks for their reports, and
    learns the job's name and hosts once they come."""
    sim = SimJob(world=8)
    news = News()
    frames = [raw for _, raw in sim.stream(until=1)]
    columns_of(frames, news=news)  # the monitor before this one got these whole
    numbers_only = columns_of([raw for _, raw in sim.stream(until=2, since=1)], news=news)
    assert not len(numbers_only.reports)
    monitor = Monitor()
    monitor.ingest_batch(numbers_only, sim.start + 2)
    state = monitor.state
    assert len(state.ranks) == 8 and state.job is None and state.cols.steps[3] > 0
    assert state.report_of(3).steps == int(state.cols.steps[3]) and state.report_of(3).host == "?"
    (asking,) = monitor.asking()
    assert asking.action == DETAILS and asking.ranks == list(range(8))
    news.watch(asking.ranks or [], 2.0)
    monitor.ingest_batch(
        columns_of([raw for _, raw in sim.stream(until=3, since=2)], news=news, now=2.5), sim.start + 3
    )
    assert state.job == "sim-job" and state.wanted() == [], "every report came"
    assert state.report_of(3).host == "node000"


# --- what does not fit ------------------------------------------------------------------------


def test_the_relays_refusals_and_claims_that_do_not_fit_the_job_are_counted() -> None:
    sim = SimJob(world=4)
    frames = [raw for _, raw in sim.stream(until=1)]
    outside = wire.encode(dataclasses.replace(sim.report(0, sim.start), rank=9))  # type: ignore[type-var]
    other = wire.encode(dataclasses.replace(sim.report(1, sim.start), job="other"))  # type: ignore[type-var]
    batch = columns_of([*frames, b"\x02 not a frame", outside, other])
    assert batch.refused == {"malformed": 1}
    state = JobState(LIMITS)
    admitted = state.ingest_batch(decode_columns(column_frames(batch)), sim.start + 1)
    assert len(admitted) == 4 and state.dropped == {"malformed": 1, "rank_out_of_range": 1, "other_job": 1}
    lying = decode_columns(column_frames(batch))
    lying.ends = lying.ends.copy()
    lying.ends[-1] += np.uint32(1)  # its last report one byte longer than its header says
    lying.reports += b"x"
    fresh = JobState(LIMITS)
    fresh.ingest_batch(lying, sim.start + 1)
    assert fresh.dropped == {"malformed": 2, "rank_out_of_range": 1} and len(fresh.ranks) == 4


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda f: [*f[:2], f[2][:-1], *f[3:]], "malformed_columns"),
        (lambda f: [*f[:3], f[3] + b"\0" * 40, *f[4:]], "malformed_columns"),
        (lambda f: [*f[:5], f[5] + b"x"], "malformed_columns"),
        (lambda f: f[:5], "malformed_columns"),
        (lambda f: [f[0], b"\xc1", *f[2:]], "malformed_columns"),
    ],
    ids=["a header cut", "rows more than the headers say", "reports past their ends", "a part missing", "not msgpack"],
)
def test_a_batch_whose_parts_do_not_fit_is_refused_whole(mutate, why: str) -> None:  # type: ignore[no-untyped-def]
    frames = column_frames(columns_of([raw for _, raw in SimJob(world=4, layout=Layout(tp=2)).stream(until=2)]))
    with pytest.raises(WireError) as refused:
        decode_columns(mutate(frames))
    assert refused.value.reason == why


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_bytes_make_decoding_columns_raise_anything_but_a_wire_error(data: st.DataObject) -> None:
    frames = column_frames(columns_of([raw for _, raw in SimJob(world=3).stream(until=1)]))
    part = data.draw(st.integers(1, 5))
    frames[part] = data.draw(st.one_of(st.binary(max_size=600), st.just(frames[part][: len(frames[part]) // 2])))
    try:
        batch = decode_columns(frames)
    except WireError:
        return
    JobState(LIMITS).ingest_batch(batch, 1.7e9)


# --- cut, merged, stored ----------------------------------------------------------------------


def test_cut_and_merged_and_chosen_a_batch_is_the_same_frames() -> None:
    frames = [raw for _, raw in SimJob(world=40, layout=Layout(tp=4, pp=2)).stream(until=1)]
    a, b = columns_of(frames[:25]), columns_of(frames[25:], relay=Relay("node-b:9", "node-b"))
    whole = ColumnBatch.merged([a, b])
    assert whole.relays == [RELAY, Relay("node-b:9", "node-b")] and whole.via.tolist() == [0] * 25 + [1] * 15
    parts = pieces(whole, 4000)
    assert len(parts) > 3 and all(p.nbytes <= 4000 for p in parts)
    again = ColumnBatch.merged(parts)
    assert again.headers.tobytes() == whole.headers.tobytes() and again.reports == whole.reports
    assert again.groups.tobytes() == whole.groups.tobytes() and again.channels.tobytes() == whole.channels.tobytes()
    chosen = whole.subset([30, 2])
    assert chosen.headers["rank"].tolist() == [30, 2] and chosen.via.tolist() == [1, 0]
    assert parse(Batch.of([frames[30], frames[2]])).groups.tobytes() == chosen.groups.tobytes()
    assert decode_columns(column_frames(chosen)).reports == frames[30][-len(wire.report_bytes(frames[30])) :] + (
        wire.report_bytes(frames[2])
    )


def test_shuffled_records_read_back_as_they_were() -> None:
    headers = columns_of([raw for _, raw in SimJob(world=16).stream(until=1)]).headers
    assert unshuffled(shuffled(headers), HEADER).tobytes() == headers.tobytes()
    with pytest.raises(WireError):
        unshuffled(b"x" * (HEADER.itemsize + 1), HEADER)
    with pytest.raises(WireError):
        assemble_columns([], b"", b"\0\0\0\0", b"x" * 3, b"", b"", b"")


def test_a_recording_of_columns_stores_each_batch_in_pieces_a_reader_holds(tmp_path: Path) -> None:
    sim = SimJob(world=8192)
    batch = columns_of([raw for _, raw in sim.stream(until=1)])
    path = tmp_path / "big.distmon"
    writer = RecordingWriter(str(path))
    writer.batch(sim.start + 1, batch)
    writer.close()
    records = list(read_recording(str(path))[1])
    assert len(records) > 1 and all(isinstance(r, ColumnRecord) for r in records)
    back = ColumnBatch.merged([r.batch for r in records if isinstance(r, ColumnRecord)])
    assert back.headers.tobytes() == batch.headers.tobytes() and back.reports == batch.reports
    assert not any(isinstance(r, MessageRecord) for r in records)


def test_what_a_monitor_asks_of_the_relays_is_what_it_looked_at() -> None:
    monitor = Monitor()
    monitor.ingest_batch(columns_of([raw for _, raw in SimJob(world=8).stream(until=1)]), 1.7e9 + 1)
    assert monitor.asking() == [], "every report came whole, none looked at"
    monitor.state.report_of(5)
    monitor.state.ranks[2].report  # noqa: B018 -- a screen's row reads it
    (asking,) = monitor.asking()
    assert asking.ranks == [2, 5] and monitor.asking() == []


def test_a_report_kept_from_before_is_brought_up_to_date_by_the_numbers() -> None:
    sim = SimJob(world=4, layout=Layout(tp=2, pp=2))
    news = News()
    state = JobState(LIMITS)
    for k in range(1, 6):
        state.ingest_batch(
            columns_of([raw for _, raw in sim.stream(until=k, since=k - 1)], news=news, now=k), sim.start + k
        )
    report = state.report_of(1)
    fresh: Report = sim.report(1, float(state.cols.t[1]))  # type: ignore[assignment]
    assert report.t == fresh.t and report.steps == fresh.steps and report.n == fresh.n
    assert [g.completed for g in report.groups] == [g.completed for g in fresh.groups]
    assert (report.memory and report.memory.rss) == (fresh.memory and fresh.memory.rss)


def test_the_html_reports_plots_read_a_recording_of_columns(tmp_path: Path) -> None:
    sim = SimJob(world=16, layout=Layout(tp=4))
    path = tmp_path / "columns.distmon"
    writer = RecordingWriter(str(path))
    for record in relayed(sim.stream(until=10), SimRelays(2, 16), sim.start, until=10):
        writer.batch(record.t, record.batch)
    writer.close()
    series = read_series(str(path), [3, 12], sim.start)
    assert len(series.ranks[12].steps) == 10 and series.ranks[12].steps == sorted(series.ranks[12].steps)
    assert series.ranks[3].steps[-1] == sim.report(3, sim.start + 9.003).steps  # type: ignore[union-attr]
    groups = {g.id for rank in (3, 12) for g in sim.report(rank, sim.start).groups}  # type: ignore[union-attr]
    assert set(series.group_names) == groups
    assert all(len(times) == 10 for times, _, _ in series.ranks[3].groups.values())


def test_a_screen_attached_to_a_monitor_fed_by_relays_shows_what_it_shows(endpoint: str) -> None:
    """A monitor taking two relays' columns, a screen attached to it once a rank has hung:
    the screen takes the relays' columns as the monitor admitted them (``n`` records) and
    knows every rank's numbers and every alert as the monitor does."""
    sim = SimJob(world=16).hang(5, at=20)
    clock = [0.0]
    records = relayed(sim.stream(until=120), SimRelays(2, 16), sim.start, until=120)
    server = AttachServer(endpoint)
    monitor = Monitor(screens=server)
    session = Session(ReplayFeed(records, speed=1.0, clock=lambda: clock[0]), monitor)

    def advance(seconds: float) -> None:
        for _ in range(round(seconds / 0.1)):
            clock[0] += 0.1
            session.run_timed(1_000_000)

    try:
        advance(30)
        feed = AttachedFeed(endpoint)

        def answered() -> bool:
            advance(0.5)
            return feed.caught_up.wait(0.05)

        wait_until(answered, 20, "the monitor's answer")
        follower = AttachedMonitor(feed)
        screen = Session(feed, follower)
        advance(5)
        mine, theirs = follower.state, monitor.state

        def caught_up() -> bool:
            screen.drain()
            return np.array_equal(mine.cols.t[:16], theirs.cols.t[:16])

        wait_until(caught_up, 10, "the screen's ranks as the monitor's")
        assert [a.kind for a in follower.alerts.history] == [a.kind for a in monitor.alerts.history] == ["hang"]
        assert np.array_equal(mine.cols.steps[:16], theirs.cols.steps[:16]) and mine.relays == theirs.relays
        assert mine.report_of(5).stack == theirs.report_of(5).stack is not None
        feed.close()
    finally:
        session.close()


def version_2(frame: bytes) -> bytes:
    """``frame`` as a rank of frame version 2 sent it: no pace, and its header without room for one."""
    frame = wire.encode(dataclasses.replace(wire.decode(frame), pace=None))
    fields = wire.HEADER.unpack_from(frame)
    old = wire.HEADER_2.pack(2, *fields[1 : len(wire.HEADER_FIELDS_2)])
    return old + frame[wire.HEADER.size :]


def test_version_2_frames_and_headers_stored_so_read_as_ranks_whose_pace_is_not_known() -> None:
    """From an older rank, relay or recording: every other number as it was, the pace NaN."""
    frames = [raw for _, raw in SimJob(world=4).stream(until=3)]
    current = parse(Batch.of(frames)).headers
    older = parse(Batch.of([version_2(f) for f in frames]))
    assert len(older) == len(frames) and not older.refused
    for name in wire.arrays.HEADER_2.names or ():
        if name not in ("version", "report"):  # its report lacks the pace too
            assert np.array_equal(older.headers[name], current[name], equal_nan=True), name
    assert np.isnan(older.headers["paced"]).all() and (current["paced"] >= 0).all()
    cut = parse(Batch.of([f[: wire.HEADER_2.size] for f in frames]))
    assert cut.refused == {"malformed": len(frames)}, "a version 3 frame cut to a version 2 header is no frame"
    batch = columns_of([version_2(f) for f in frames])
    stored = wire.arrays.HEADER_2
    headers = np.zeros(len(frames), dtype=stored)
    for name in stored.names or ():
        headers[name] = batch.headers[name]
    headers["version"] = 2
    relays, via, ends = [[RELAY.id, RELAY.host]], batch.via.tobytes(), batch.ends.tobytes()
    sent = assemble_columns(relays, via, ends, headers.tobytes(), batch.groups.tobytes(), batch.channels.tobytes(),
                            batch.reports)  # fmt: skip
    recorded = stored_batch(["n", 0.0, relays, via, ends, shuffled(headers), shuffled(batch.groups),
                             shuffled(batch.channels), batch.reports])  # fmt: skip
    for read in (sent, recorded):
        assert isinstance(read, ColumnBatch) and read.headers.dtype == HEADER
        assert (read.headers["version"] == wire.FRAME_VERSION).all() and np.isnan(read.headers["paced"]).all()
        assert (read.headers["rank"] == current["rank"]).all()
