"""Real NCCL Flight Recorder dumps from GPU jobs (tests/data/nccl-dumps, see its NOTICE.md):
16-rank Megatron-core MoE jobs (TP2 x PP4 x EP4) into which faults were injected. Each set's
``fault_injection.log`` is the truth: every faulted rank is named, no innocent one, by
``distmon analyze`` and by the live monitor fed the same dumps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distmon.cli import main
from distmon.flightrecorder.fields import group_ranks, read_dump
from distmon.flightrecorder.loading import load_dump
from distmon.forensics.analysis import analyze
from distmon.forensics.evidence import CODE, HARDWARE, evidence
from distmon.forensics.render import culprits, render_analysis
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.alerts import CRITICAL
from distmon.wire import Report, encode
from tests.support.paths import DATA

SETS = DATA / "nccl-dumps"
FAULTS = {"gpu_error_2nd": HARDWARE, "lock_gil_2nd": CODE}


def dumps(name: str) -> list[str]:
    return sorted(str(p) for p in (SETS / name).glob("_dump_*"))


def truth(name: str) -> list[int]:
    found = re.search(r"Fault ranks: \[([\d, ]+)\]", (SETS / name / "fault_injection.log").read_text())
    assert found is not None
    return sorted(int(r) for r in found.group(1).split(","))


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_every_faulted_rank_is_named_and_no_innocent(name: str) -> None:
    analysis = analyze(dumps(name))
    assert culprits(analysis) == truth(name)
    named = {r for a in analysis.alerts for r in a.ranks}
    assert named <= set(truth(name)), f"an alert names an innocent rank: {sorted(named - set(truth(name)))}"
    assert analysis.missing == {}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_culprit_says_why_and_what_it_points_at(name: str) -> None:
    analysis = analyze(dumps(name))
    found = evidence(analysis, culprits(analysis))
    assert [e.rank for e in found] == truth(name)
    assert {e.points_at for e in found} == {FAULTS[name]}
    why = "device stopped completing" if FAULTS[name] == HARDWARE else "host stopped enqueuing"
    assert all(why in e.why for e in found)
    text = render_analysis(analysis)
    assert "pid 0" not in text and "step 0" not in text and "had not stalled" not in text
    assert "TENSOR_MODEL_PARALLEL_GROUP" in text and "BFloat16" in text


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_waits_are_measured_from_the_dump_not_the_last_entry(name: str) -> None:
    """No file time to go by (the files were copied): the dump is taken when the first
    watchdog fires, a collective timeout (3 minutes here) after the oldest work pending."""
    analysis = analyze(dumps(name))
    text = render_analysis(analysis)
    assert re.search(r"for (2m59s|3m00s)", text), text
    assert " 0.0s" not in text and " 0.3s" not in text


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_the_live_monitor_fed_the_same_dumps_names_the_same_ranks(name: str) -> None:
    """The dumps through the shared reader into reports, judged by a live monitor with its
    own thresholds, ticking as it would: the culprits ``analyze`` names."""
    loaded = {int(path.rsplit("_", 1)[1]): load_dump(Path(path).read_bytes()) for path in dumps(name)}
    members = {
        n: ranks for d in loaded.values() for n, c in d["pg_config"].items() if (ranks := group_ranks(c)) is not None
    }
    read = {rank: read_dump(d, members) for rank, d in loaded.items()}
    now = analyze(dumps(name)).t
    monitor = Monitor(Detector(), job="live")
    for tick in range(3):
        for rank, d in read.items():
            report = Report("live", rank, 16, f"node{rank // 8}", 1000 + rank, now, tick + 1, 1.0, backend="nccl")
            report.groups, report.p2p = d.groups, d.p2p
            monitor.ingest(encode(report), now)
        monitor.tick(now)
        now += 1.0
    critical = [a for a in monitor.alerts.history if a.severity == CRITICAL and a.ranks]
    assert critical and sorted(critical[0].ranks) == truth(name)
    assert {r for a in monitor.alerts.history if a.kind == "hang" for r in a.ranks} <= set(truth(name))


def test_json_carries_the_culprits_and_their_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", *dumps("gpu_error_2nd"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["culprits"] == [9, 14]
    assert [e["rank"] for e in out["evidence"]] == [9, 14]
    assert all(e["points_at"] == HARDWARE and "nvidia-smi" in e["next"] for e in out["evidence"])


def test_the_hooks_reader_names_every_group_of_a_dump_whose_ring_holds_none() -> None:
    """The live hook's reader on rank 10's real dump (its ring empty: nothing in flight):
    every group is named, by the order the rank created them, so none drops out of its report."""
    from distmon.hooks.collectives import Recorder

    raw = (SETS / "lock_gil_2nd" / "_dump_10").read_bytes()
    dump = load_dump(raw)
    assert dump["entries"] == []
    by_name = Recorder("nccl", lambda full: raw).status_by_name()
    assert set(by_name) == set(dump["pg_config"])
    assert by_name["40"]["last_enqueued_collective"] == 31442  # its tensor-parallel pair's
