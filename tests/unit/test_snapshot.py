"""The Prometheus scrape runs on the HTTP server's thread while the monitor's thread takes in
an 8192-rank job: every scrape shows one tick whole (the job's counts agree with each other
and with the ranks and alerts it names), however the two threads interleave."""

from __future__ import annotations

import argparse
import math
import threading

from prometheus_client import CollectorRegistry

from distmon.commands.shared import metrics_port
from distmon.export.prometheus import MonitorCollector
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import MessageRecord
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session
from tests.support.commands import free_port
from tests.support.metrics import scrape
from tests.support.simulate import SimJob, drive

WORLD = 8192
UNTIL = 12.0


def job(samples: dict[str, list], name: str) -> float:
    [sample] = samples[f"distmon_job_{name}"]
    return float(sample.value)


def check_whole(samples: dict[str, list]) -> tuple[float, ...]:
    """What must hold within one scrape; returns the scrape's job figures, as :func:`at_tick`."""
    reporting = job(samples, "ranks_reporting")
    assert job(samples, "world_size") == (WORLD if reporting else 0)
    for name in ("silent", "stalled", "exited", "failed"):
        assert 0 <= job(samples, f"ranks_{name}") <= reporting, name
    if reporting:
        assert job(samples, "steps_min") <= job(samples, "steps_median") <= job(samples, "steps_max")
    active = {s.labels["kind"]: s.value for s in samples.get("distmon_alert_active", [])}
    named = {(s.labels["kind"], s.labels["rank"]) for s in samples.get("distmon_alert_rank", [])}
    assert all(active.get(kind, 0) >= 1 for kind, _ in named), (active, named)
    served = {s.labels["rank"] for s in samples.get("distmon_rank_steps_total", [])}
    assert served == {rank for _, rank in named}, "above 1024 ranks: exactly the named ranks' series"
    steps = job(samples, "steps_max") if reporting else -1.0
    messages = samples["distmon_messages_total"][0].value
    return messages, reporting, job(samples, "ranks_silent"), job(samples, "ranks_stalled"), steps, sum(active.values())


def at_tick(monitor: Monitor, now: float) -> tuple[float, ...]:
    """The job figures a scrape must show, read off the live state right after the tick at
    ``now``, on the monitor's thread."""
    state = monitor.state
    present = state.present()
    steps = float(state.cols.steps[present].max()) if len(present) else -1.0
    return (
        state.received,
        len(present),
        int(state.silent(now).sum()),
        int(state.stalled(now).sum()),
        steps,
        len(monitor.alerts.active),
    )


def test_scrapes_under_an_8192_rank_stream_are_never_torn() -> None:
    sim = SimJob(world=WORLD).hang(4097, at=6)
    records = [MessageRecord(t, raw) for t, raw in sim.stream(until=UNTIL)]
    monitor = Monitor(Detector(probe=sim.probe))
    ticks = [(0, 0, 0, 0, -1.0, 0)]
    session = Session(
        ReplayFeed(iter(records), speed=math.inf, end=sim.start + UNTIL),
        monitor,
        on_tick=lambda now: ticks.append(at_tick(monitor, now)),
    )

    def drive() -> None:
        while session.run(2048) or session.taken:
            pass
        session.finish()

    parser = argparse.ArgumentParser()
    metrics_port.add_metrics_port_argument(parser)
    port = free_port()
    server = metrics_port.serve_metrics(parser.parse_args(["--metrics-port", str(port)]), monitor)
    assert server is not None
    monitor_thread = threading.Thread(target=drive, name="monitor")
    try:
        monitor_thread.start()
        seen: list[tuple[float, ...]] = []
        while monitor_thread.is_alive() or len(seen) < 3:
            seen.append(check_whole(scrape(port)))
        monitor_thread.join()
        final = scrape(port)
    finally:
        server.shutdown()
        server.server_close()
    assert check_whole(final) == ticks[-1] and ticks[-1][1] == WORLD
    assert {s.labels["kind"] for s in final["distmon_alert_active"] if s.value} >= {"hang"}
    torn = [figures for figures in seen if figures not in ticks]
    assert not torn, f"scrapes that match no tick: {torn[:3]}"
    assert seen == sorted(seen), "each scrape a tick at or after the one before"
    assert len(set(seen)) > 3, "the scrapes fell among the stream's ticks"


def test_the_scrape_reads_the_latest_tick_not_the_live_state() -> None:
    sim = SimJob(world=8)
    monitor = Monitor(Detector(probe=sim.probe))
    registry = CollectorRegistry()
    registry.register(MonitorCollector(monitor))
    records = iter(MessageRecord(t, raw) for t, raw in sim.stream(until=6))
    session = Session(ReplayFeed(records, speed=math.inf), monitor)
    session.drain()
    ticked = monitor.snapshot
    assert ticked.t == monitor.last_tick
    for t, raw in sim.stream(until=6.5, since=6):
        monitor.ingest(raw, t)  # taken in after the tick
    assert monitor.state.received > ticked.received
    assert registry.get_sample_value("distmon_messages_total", {"job_id": "sim-job"}) == ticked.received
    monitor.publish(sim.start + 7)
    assert registry.get_sample_value("distmon_messages_total", {"job_id": "sim-job"}) == monitor.state.received


def test_a_monitor_nobody_scrapes_publishes_nothing() -> None:
    sim = SimJob(world=8)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, until=5)
    assert monitor.last_tick and monitor.snapshot.t == 0 and not len(monitor.snapshot.ranks)
