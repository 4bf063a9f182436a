"""NCCL's RAS report of a communicator whose ranks launched different numbers of operations: the
ranks behind are suspected, however RAS lists them (``distmon.forensics.ras``). Every line here
is written as NCCL's ``client_support.cc`` writes it, for these tests alone."""

from __future__ import annotations

import tempfile
from pathlib import Path

from distmon.forensics.analysis import analyze
from distmon.forensics.blame import Blame, assign_blame

HEAD = """\
Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         8        16        16   RUNNING  MISMATCH

Warnings
========

#0-0 (0123456789abcdef) MISMATCH
  Communicator ranks have different AllReduce operation counts
"""


def judged(text: str) -> Blame:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "ras.txt").write_text(text)
        return assign_blame(analyze([folder]))


def suspects(verdict: Blame) -> list[int]:
    return [s.rank for s in verdict.suspects]


def test_the_few_ranks_listed_behind_are_suspected() -> None:
    text = HEAD + "  13 ranks have launched up to operation 900\n  3 ranks have launched up to operation 899\n"
    text += "".join(
        f"  Rank {r} -- GPU {r % 8} managed by process {700 + r} on node 10.0.0.{r // 8}\n" for r in (2, 9, 11)
    )
    verdict = judged(text)
    assert verdict.culprits == [] and suspects(verdict) == [2, 9, 11]
    assert "launched up to #899 where others launched up to #900" in verdict.suspects[0].why


def test_where_ras_lists_the_few_ahead_the_communicators_other_ranks_are_behind() -> None:
    text = HEAD + "  14 ranks have launched up to operation 640\n  2 ranks have launched up to operation 641\n"
    text += "  Rank 12 -- GPU 4 managed by process 812 on node 10.0.0.1\n"
    text += "  Rank 13 -- GPU 5 managed by process 813 on node 10.0.0.1\n"
    assert suspects(judged(text)) == [r for r in range(16) if r not in (12, 13)]


def test_a_rank_alone_at_its_count_is_listed_on_its_own_line() -> None:
    text = HEAD + "  15 ranks have launched up to operation 64\n"
    text += "  Rank 7 has launched up to operation 60 -- GPU 7 managed by process 1650386 on node node1\n"
    assert suspects(judged(text)) == [7]


def test_counts_whose_ranks_ras_does_not_list_suspect_nobody() -> None:
    """Two counts of many ranks each: RAS lists neither, and the reader does not guess."""
    text = HEAD + "  9 ranks have launched up to operation 64\n  7 ranks have launched up to operation 63\n"
    assert suspects(judged(text)) == []


def test_a_communicator_of_some_of_the_jobs_processes_numbers_its_own_ranks() -> None:
    """Where RAS's summary counts the job's processes, a smaller communicator's ranks are not the job's."""
    summary = (
        "Job summary\n===========\n\n  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n      4          8            1         32       32\n\n"
    )
    text = HEAD + "  15 ranks have launched up to operation 64\n"
    text += "  Rank 7 has launched up to operation 60 -- GPU 7 managed by process 1650386 on node node1\n"
    assert suspects(judged(summary + text)) == []
    assert suspects(judged(summary.replace("32       32", "16       16") + text)) == [7]


def test_a_communicator_of_fewer_ranks_than_the_world_numbers_its_own() -> None:
    text = (
        HEAD.replace("#0-0 (0123456789abcdef)", "#1-1 (0123456789abcdef)")
        + "  3 ranks have launched up to operation 9\n"
    )
    text += "  Rank 0 has launched up to operation 4 -- GPU 4 managed by process 77104 on node n2\n"
    wait = (
        "[rank15]:[E1206 10:10:01.123456 22 ProcessGroupNCCL.cpp:616] [Rank 15] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600021 "
        "milliseconds before timing out.\n"
    )
    assert all("RAS" not in s.why for s in judged(text + wait).suspects)


def test_reports_of_one_communicator_whose_counts_move_on_suspect_nobody_and_those_that_stay_are_stuck() -> None:
    def report(low: int, high: int) -> str:
        return (
            HEAD
            + f"  15 ranks have launched up to operation {high}\n"
            + (f"  Rank 7 has launched up to operation {low} -- GPU 7 managed by process 1650386 on node node1\n")
        )

    assert suspects(judged(report(60, 64) + report(90, 94))) == []
    stuck = judged(report(60, 64) + report(60, 94))
    assert suspects(stuck) == [7] and "still there in an earlier report" in stuck.suspects[0].why


def test_a_rank_ras_found_no_process_for_and_a_blank_line_inside_a_block_are_read() -> None:
    text = HEAD + "  15 ranks have launched up to operation 64\n\n"
    text += "  Rank 7 has launched up to operation 60 -- [process information not found]\n"
    assert suspects(judged(text)) == [7]
