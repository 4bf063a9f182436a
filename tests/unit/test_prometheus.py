"""``--metrics-port``: a real ``distmon record`` fed a simulated job over ZeroMQ, or a
monitor served in-process, scraped over HTTP the way Prometheus does, and parsed with
prometheus_client's own parser."""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from distmon.commands.shared import metrics_port
from distmon.export import prometheus
from distmon.export.prometheus import RANK_SERIES, MonitorCollector
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from tests.support.commands import DISTMON, distmon, free_port
from tests.support.messages import sender
from tests.support.metrics import scrape
from tests.support.paths import REPO
from tests.support.simulate import GiB, SimJob, drive

RANK_LABELS = {"job_id", "rank", "host", "local_rank"}


@pytest.fixture
def served() -> Iterator[Callable[..., dict[str, list]]]:
    """Serve a monitor of a simulated job over HTTP, given the ``--metrics-*`` options, and
    scrape it once."""
    servers = []

    def serve(monitor: Monitor, *options: str) -> dict[str, list]:
        parser = argparse.ArgumentParser()
        metrics_port.add_metrics_port_argument(parser)
        port = free_port()
        server = metrics_port.serve_metrics(parser.parse_args(["--metrics-port", str(port), *options]), monitor)
        servers.append(server)
        return scrape(port)

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def hung(world: int) -> Monitor:
    """A job whose rank 5 went silent in native code 15 s ago (the others wait for it), with
    rank 3 leaking host memory; its reports are as fresh as the wall clock."""
    sim = SimJob(world=world, ranks_per_host=4, start=time.time() - 20).gil(5, at=5).leak(3, GiB / 4)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, until=20)
    return monitor


def values(samples: dict[str, list], name: str) -> list[float]:
    return [s.value for s in samples[name]]


def test_the_job_series_sum_up_the_ranks(served: Callable[..., dict[str, list]]) -> None:
    samples = served(hung(8))
    jobs = {name: ss for name, ss in samples.items() if name.startswith("distmon_job_")}
    assert all([s.labels for s in ss] == [{"job_id": "sim-job"}] for ss in jobs.values())
    job = {name[len("distmon_job_") :]: ss[0].value for name, ss in jobs.items()}
    ranks = ("world_size", "ranks_reporting", "ranks_silent", "ranks_stalled", "ranks_exited", "ranks_failed")
    assert [job[k] for k in ranks] == [8, 8, 1, 7, 0, 0]
    steps = values(samples, "distmon_rank_steps_total")
    assert (job["steps_min"], job["steps_median"], job["steps_max"]) == (
        min(steps),
        statistics.median(steps),
        max(steps),
    ) and min(steps) < max(steps)
    assert job["step_time_median_seconds"] == job["step_time_max_seconds"] == 0.2
    assert job["collective_age_max_seconds"] == pytest.approx(15, abs=2)
    assert job["collective_age_max_seconds"] == max(values(samples, "distmon_rank_collective_age_seconds"))
    silence = values(samples, "distmon_rank_last_report_age_seconds")
    assert job["last_report_age_max_seconds"] == max(silence) == pytest.approx(15.4, abs=2)
    rss, gpu = values(samples, "distmon_rank_rss_bytes"), values(samples, "distmon_rank_gpu_memory_used_bytes")
    assert (job["rss_max_bytes"], job["rss_sum_bytes"]) == (max(rss), sum(rss))
    assert job["rss_max_bytes"] > 3 * GiB, "the leak"
    assert (job["gpu_memory_used_max_bytes"], job["gpu_memory_used_sum_bytes"]) == (
        max(gpu),
        sum(gpu),
    )


def test_above_the_per_rank_world_only_the_named_ranks_have_series_unless_asked(
    served: Callable[..., dict[str, list]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus, "PER_RANK_WORLD", 4)
    monitor = hung(8)
    named = served(monitor)
    assert {s.labels["rank"] for s in named["distmon_alert_rank"]} == {"5"}
    for series in RANK_SERIES:
        name = series.name + ("_total" if series.counter else "")
        assert {s.labels["rank"] for s in named.get(name, [])} <= {"5"}, name
    assert [s.labels for s in named["distmon_rank_last_report_age_seconds"]] == [
        {"job_id": "sim-job", "rank": "5", "host": "node001", "local_rank": "1"}
    ]
    assert named["distmon_job_ranks_reporting"][0].value == 8
    every = served(monitor, "--metrics-per-rank")
    assert {s.labels["rank"] for s in every["distmon_rank_steps_total"]} == {str(r) for r in range(8)}
    for series in RANK_SERIES:
        assert len(every[series.name + ("_total" if series.counter else "")]) == 8, series.name


@pytest.fixture
def recorder(tmp_path: Path, endpoint: str) -> Iterator[tuple[int, zmq.Socket]]:
    """``distmon record --metrics-port`` and a PUSH socket into its endpoint."""
    port = free_port()
    process = subprocess.Popen(
        [
            *DISTMON,
            "record",
            "--out",
            str(tmp_path / "run.distmon"),
            "--endpoint",
            endpoint,
            "--metrics-port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with sender(endpoint, linger=0) as push:
            yield port, push
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err


def test_record_serves_every_rank_and_the_hang_alert_over_http(recorder: tuple[int, zmq.Socket]) -> None:
    port, push = recorder
    assert scrape(port)["distmon_job_ranks_reporting"][0].value == 0  # up before any rank reports
    sim = SimJob(world=4, ranks_per_host=2, start=time.time() - 20).hang(2, at=5)
    for _, raw in sim.stream(until=20):
        push.send(raw)
    deadline = time.monotonic() + 15
    while not (samples := scrape(port)).get("distmon_alert_rank") and time.monotonic() < deadline:
        time.sleep(0.3)

    steps = samples["distmon_rank_steps_total"]
    assert {s.labels["rank"] for s in steps} == {"0", "1", "2", "3"}
    assert all(set(s.labels) == RANK_LABELS and s.labels["job_id"] == "sim-job" for s in steps)
    assert {s.labels["host"] for s in steps} == {"node000", "node001"}
    assert {(s.labels["rank"], s.labels["local_rank"]) for s in steps} == {
        ("0", "0"),
        ("1", "1"),
        ("2", "0"),
        ("3", "1"),
    }
    for series in RANK_SERIES:
        name = series.name + ("_total" if series.counter else "")
        assert len(samples[name]) == 4, name
    waiting = {s.labels["rank"]: s.value for s in samples["distmon_rank_collective_age_seconds"]}
    assert waiting["2"] == 0 and min(waiting["0"], waiting["1"], waiting["3"]) > 10
    assert all(0 < s.value <= 1 for s in samples["distmon_rank_gpu_utilization_ratio"])
    [hang] = [s for s in samples["distmon_alert_active"] if s.labels["kind"] == "hang"]
    assert hang.labels == {"job_id": "sim-job", "kind": "hang", "severity": "critical"} and hang.value == 1
    assert [(s.labels["kind"], s.labels["rank"]) for s in samples["distmon_alert_rank"]] == [("hang", "2")]
    assert [(s.labels["kind"], s.labels["rank"]) for s in samples["distmon_culprit"]] == [("hang", "2")]


def test_a_resolved_alert_reads_zero_and_its_ranks_go() -> None:
    sim = SimJob(world=4, gpu=False).exception(1, at=5)
    monitor = Monitor(Detector(probe=sim.probe))
    collector = MonitorCollector(monitor)
    drive(sim, monitor, until=10)
    families = {f.name: f for f in collector.collect()}
    assert not families["distmon_rank_gpu_memory_used_bytes"].samples, "no GPU, no GPU series"
    assert [(s.labels["kind"], s.value) for s in families["distmon_alert_active"].samples] == [("rank_exception", 1)]
    assert [s.labels["rank"] for s in families["distmon_alert_rank"].samples] == ["1"]
    assert [s.labels["rank"] for s in families["distmon_culprit"].samples] == ["1"], "the one the report names"
    assert [families[f"distmon_job_ranks_{which}"].samples[0].value for which in ("exited", "failed")] == [4, 4]
    monitor.alerts.update([], sim.start + 11)
    monitor.publish(sim.start + 11)
    families = {f.name: f for f in collector.collect()}
    assert [s.value for s in families["distmon_alert_active"].samples] == [0]
    assert families["distmon_alert_rank"].samples == []
    assert families["distmon_culprit"].samples == []


@pytest.mark.parametrize("command", [["record", "--out", "x.distmon"], ["watch"]])
def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, endpoint: str, command: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = distmon(*command, "--endpoint", endpoint, "--metrics-port", str(port), cwd=tmp_path)
    assert done.returncode == 2
    assert f"cannot serve metrics on port {port}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_run_hands_the_port_to_its_recorder(tmp_path: Path) -> None:
    """The job itself scrapes the recorder that ``distmon run`` started for it."""
    port = free_port()
    job = textwrap.dedent(
        f"""
        import time, urllib.request
        for _ in range(100):
            try:
                print(urllib.request.urlopen("http://127.0.0.1:{port}/metrics").read().decode())
                break
            except OSError:
                time.sleep(0.1)
        """
    )
    done = distmon(
        "run", "--record", tmp_path / "run.distmon", "--metrics-port", str(port), "--", sys.executable, "-c", job
    )
    assert done.returncode == 0, done.stderr
    assert "distmon_job_ranks_reporting" in done.stdout


def test_run_metrics_without_a_monitor_is_a_usage_error() -> None:
    done = distmon("run", "--metrics-port", "9400", "--", "true")
    assert done.returncode == 2
    assert "--metrics-port goes with --watch or --record" in done.stderr


def test_per_rank_series_without_a_port_is_a_usage_error() -> None:
    done = distmon("run", "--watch", "--metrics-per-rank", "--", "true")
    assert done.returncode == 2
    assert done.stderr == "distmon run: --metrics-per-rank goes with --metrics-port\n"


TARGET_LABELS = {"job", "instance"}
"""Labels Prometheus sets on every series it scrapes: a series of ours carrying one would
arrive renamed (``exported_job``) and a dashboard filtering on it would find nothing."""


def test_the_grafana_dashboard_queries_only_series_and_labels_that_survive_a_scrape() -> None:
    dashboard = json.loads((REPO / "dashboards" / "distmon.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries.append(dashboard["templating"]["list"][1]["query"]["query"])
    used = {name for q in queries for name in re.findall(r"distmon_[a-z_]+", q)}
    matched = {label for q in queries for label in re.findall(r"([a-z_]+)\s*=~?", q)}
    matched |= {label for q in queries for by in re.findall(r"by \(([^)]*)\)", q) for label in by.split(", ")}
    matched |= {label for q in queries for label in re.findall(r"label_values\([a-z_]+, ([a-z_]+)\)", q)}
    sim = SimJob(world=8, gpu=True).hang(3, at=5)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, until=15)
    registry = CollectorRegistry()
    registry.register(MonitorCollector(monitor))
    families = list(text_string_to_metric_families(generate_latest(registry).decode()))
    served = {s.name for f in families for s in f.samples}
    labels = {label for f in families for s in f.samples for label in s.labels}
    assert used and used <= served, used - served
    assert not labels & TARGET_LABELS, labels & TARGET_LABELS
    assert "job_id" in matched and matched <= labels, matched - labels
