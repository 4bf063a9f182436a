"""``distmon analyze`` on job logs in every shape torch's watchdog and launchers have printed
(``tests/data/logs/``, one shape a file, its first line saying which and the culprit): each
names the rank the rules name, and none says that no rank waited."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from distmon.cli import main
from distmon.forensics.analysis import analyze
from distmon.forensics.logs import MAX_LINE, read_log
from distmon.forensics.render import NOTHING, culprits, render, summary

LOGS = Path(__file__).parent / "data" / "logs"

SHAPES = [
    # file, --world, the culprits, words the summary holds
    ("torch19_no_seqnum.log", None, [2], "rank 2 holds up the job"),
    ("torch20_terminate.log", None, [1], "rank 1 holds up the job"),
    ("torch24_pg_desc.log", None, [6], "rank 6 holds up the job"),
    ("checkpoint_two_ranks.log", None, [0], "rank 0 holds up the job"),
    ("first_collective.log", 4, [1], "rank 1 holds up the job"),
    ("tp8_silent_rank.log", None, [5], "TENSOR_MODEL_PARALLEL_GROUP"),
    ("traceback_oom_16.log", None, [11], "rank 11 raised torch.OutOfMemoryError: CUDA out of memory"),
    ("docker_silent_rank0.log", None, [0], "rank 0 holds up the job"),
    ("wrapped_padded.log", None, [2], "rank 2 holds up the job"),
    ("indented_progress_bar.log", None, [3], "rank 3 holds up the job"),
    ("host_prefixes.log", None, [9], "rank 9 holds up the job"),
    ("heartbeat_only.log", None, [2], "rank 2 holds up the job"),
]


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(name for name, *_ in SHAPES)


@pytest.mark.parametrize(("name", "world", "expected", "words"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_shape_names_the_rank_the_rules_name(
    name: str, world: int | None, expected: list[int], words: str
) -> None:
    analysis = analyze([str(LOGS / name)], world=world)
    said = summary(analysis)
    assert culprits(analysis) == expected, render(analysis)
    assert words in said
    assert NOTHING not in said and "no rank was waiting" not in render(analysis)
    assert analysis.problems == []
    assert f"Culprit: rank {expected[0]}" in (LOGS / name).read_text().splitlines()[0]


def test_the_json_names_the_culprit_and_the_exception(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(LOGS / "traceback_oom_16.log"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["culprits"] == [11]
    cause = next(a for a in found["alerts"] if a["kind"] == "rank_exception")
    assert cause["ranks"] == [11] and "torch.OutOfMemoryError" in cause["summary"]


def test_a_64k_line_of_repeated_watchdog_prefixes_is_read_fast() -> None:
    prefix = (
        "[rank0]:[E1124 03:12:44.123 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
        "detected by watchdog at work sequence id: 1 PG status: last enqueued work: "
        "Timeout at NCCL work: 1, last enqueued NCCL work: "
    )
    line = (prefix * (MAX_LINE // len(prefix) + 1))[:MAX_LINE]
    started = time.perf_counter()
    read_log(io.StringIO("\n".join([line] * 8)))
    assert time.perf_counter() - started < 1.0
