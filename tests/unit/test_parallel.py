"""Dumps read on every core (distmon/forensics/parallel.py): the same verdict as one at a
time, and a file that kills its worker (a tuple a million deep, which overflows the C stack
when hashed) is read again within the limits, said in one line, the others kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmon.forensics import parallel
from distmon.forensics.analysis import analyze
from distmon.forensics.render import analysis_json, culprits
from tests.support.nccl_dumps import Group, RankRecorder, nested_tuple_key

WORLD = 24
STUCK = 17


def hang(folder: Path) -> None:
    """24 ranks in pairs: rank 17 stops before its pair's third all-reduce."""
    world = Group("0", "default_pg", list(range(WORLD)))
    for rank in range(WORLD):
        r = RankRecorder(rank)
        r.join(world)
        pair = Group(str(1 + rank // 2), "TENSOR_MODEL_PARALLEL_GROUP", [rank - rank % 2, rank - rank % 2 + 1])
        r.join(pair)
        for step in range(3):
            if step < 2 or rank != STUCK:
                r.collective(pair.name, "all_reduce", done=step < 2 or rank // 2 != STUCK // 2)
        (folder / f"nccl_trace_rank_{rank}").write_bytes(r.pickle())


def test_on_every_core_the_verdict_is_the_same_as_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hang(tmp_path)
    together = analysis_json(analyze([str(tmp_path)]))
    monkeypatch.setattr(parallel, "MIN_PARALLEL", 10**9)
    alone = analysis_json(analyze([str(tmp_path)]))
    assert together == alone and together["culprits"] == [STUCK]


def test_a_file_that_kills_its_worker_is_one_line_and_the_others_are_read(tmp_path: Path) -> None:
    hang(tmp_path)
    (tmp_path / "nccl_trace_rank_3").write_bytes(nested_tuple_key(1_000_000))
    analysis = analyze([str(tmp_path)])
    assert analysis.dumps == WORLD - 1
    assert [p for p in analysis.problems if "nccl_trace_rank_3" in p] == [
        f"{tmp_path}/nccl_trace_rank_3: nested deeper than 100 levels: not a dump"
    ]
    assert culprits(analysis) == [STUCK]
