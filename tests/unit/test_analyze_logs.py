"""``distmon analyze`` on job logs in every shape torch's watchdog and launchers have printed
(``tests/data/logs/``, one shape a file, its first line saying which and the rank): each names
the rank the rules name, proven where the lines show it at fault, suspected where only a
rank's silence points to it, and none says that no rank waited. Logs users pasted into public
issues are in ``tests/unit/test_real_logs.py``."""

from __future__ import annotations

import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from distmon.cli import main
from distmon.forensics import standings
from distmon.forensics.analysis import Analysis, analyze
from distmon.forensics.blame import NOTHING, assign_blame
from distmon.forensics.logs import read_log
from distmon.forensics.pasted import MAX_LINE
from distmon.forensics.render import analysis_summary, culprits, render_analysis
from distmon.wire import PEER_LOST
from tests.support.paths import DATA

LOGS = DATA / "logs"

SHAPES = [
    # file, --world, the culprits proven, the first suspect, words the summary holds
    ("torch19_no_seqnum.log", None, [], 2, "suspected: rank 2 (no line in the log)"),
    ("torch20_terminate.log", None, [1], None, "rank 1 holds up the job"),
    ("torch24_pg_desc.log", None, [], 6, "suspected: rank 6 (its lines are in the log, but no watchdog line"),
    ("checkpoint_two_ranks.log", None, [0], None, "rank 0 holds up the job"),
    ("first_collective.log", 4, [], 1, "suspected: rank 1"),
    ("tp8_silent_rank.log", None, [], 5, "TENSOR_MODEL_PARALLEL_GROUP"),
    ("init_options_last_rank.log", None, [], 7, "suspected: rank 7"),
    ("traceback_oom_16.log", None, [11], None, "rank 11 raised torch.OutOfMemoryError: CUDA out of memory"),
    ("traceback_node_torn_down.log", None, [11], None, "rank 11 raised torch.OutOfMemoryError: CUDA out of memory"),
    ("docker_silent_rank0.log", None, [], 0, "suspected: rank 0 (no line in the log; rank 0 most often works alone"),
    ("wrapped_padded.log", None, [2], None, "rank 2 holds up the job"),
    ("indented_progress_bar.log", None, [], 3, "suspected: rank 3"),
    ("host_prefixes.log", None, [9], None, "rank 9 holds up the job"),
    ("heartbeat_only.log", None, [], 2, "with the watchdog stuck"),
    ("childfailed_root_cause.log", None, [3], None, "rank 3 raised ValueError: expected sequence of length 512"),
    ("childfailed_sigkill.log", None, [5], None, "rank 5 raised Signal 9 (SIGKILL)"),
    ("deepspeed_launcher.log", None, [], 2, "suspected: rank 2"),
    ("lightning_last_rank.log", None, [], 3, "suspected: rank 3"),
    ("accelerate_last_rank.log", None, [], 7, "suspected: rank 7"),
    ("two_tracebacks.log", None, [5], None, "rank 5 raised KeyError: 'shard-00017'"),
    ("spawn_process_error.log", None, [1], None, "rank 1 raised FileNotFoundError: [Errno 2]"),
    ("op_mismatch.log", None, [3], None, "rank 3 in broadcast, the others in all_reduce"),
]


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(name for name, *_ in SHAPES)


@pytest.mark.parametrize(("name", "world", "proven", "suspect", "words"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_shape_names_the_rank_the_rules_name(
    name: str, world: int | None, proven: list[int], suspect: int | None, words: str
) -> None:
    analysis = analyze([str(LOGS / name)], world=world)
    verdict = assign_blame(analysis)
    assert verdict.culprits == proven, render_analysis(analysis)
    assert [s.rank for s in verdict.suspects[:1]] == ([] if suspect is None else [suspect]), render_analysis(analysis)
    assert words in verdict.headline
    assert NOTHING not in verdict.headline and "no rank was waiting" not in render_analysis(analysis)
    assert analysis.problems == []
    said = f"Culprit: rank {proven[0]}" if proven else f"Suspected: rank {suspect}"
    assert said in (LOGS / name).read_text().splitlines()[0]


def test_a_suspect_is_said_suspected_and_named_no_culprit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(LOGS / "docker_silent_rank0.log"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["culprits"] == [] and found["evidence"] == []
    assert found["suspects"][0]["rank"] == 0 and "no line in the log" in found["suspects"][0]["why"]
    assert "suspected" in found["summary"]
    printed = render_analysis(analyze([str(LOGS / "docker_silent_rank0.log")]))
    assert "SUSPECTED rank 0" in printed and "CULPRIT" not in printed


def test_the_json_keeps_no_alert_its_nobody_explains(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """As the text: where every rank failed alike, no rank's exception is left as a critical alert."""
    oom = "[rank{r}]: Traceback (most recent call last):\n[rank{r}]: torch.OutOfMemoryError: CUDA out of memory.\n"
    (tmp_path / "job.log").write_text(oom.format(r=0) + oom.format(r=1))
    assert main(["analyze", str(tmp_path / "job.log"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["nobody"] is not None and found["alerts"] == []


def test_the_json_names_the_culprit_and_the_exception(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(LOGS / "traceback_oom_16.log"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["culprits"] == [11]
    cause = next(a for a in found["alerts"] if a["kind"] == "rank_exception")
    assert cause["ranks"] == [11] and "torch.OutOfMemoryError" in cause["summary"]
    assert all(a["ranks"] == [11] for a in found["alerts"]), "the peers' wait is on rank 11, not 'none behind'"
    rank11 = next(r for r in found["ranks"] if r["rank"] == 11)
    assert [(g["enqueued"], g["completed"]) for g in rank11["groups"]] == [(4020, 4020)]


def test_a_64k_line_of_repeated_watchdog_prefixes_is_read_fast() -> None:
    prefix = (
        "[rank0]:[E1124 03:12:44.123 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
        "detected by watchdog at work sequence id: 1 PG status: last enqueued work: "
        "Timeout at NCCL work: 1, last enqueued NCCL work: "
    )
    line = (prefix * (MAX_LINE // len(prefix) + 1))[:MAX_LINE]
    long = seconds_to_read("\n".join([line] * 8))
    usual = seconds_to_read("\n".join([prefix] * (8 * MAX_LINE // len(prefix))))
    assert long < 4 * usual, (long, usual)  # as fast as the same bytes in lines of the usual length


def seconds_to_read(text: str) -> float:
    """How long the reader takes on ``text``: set against another text read at the same moment, so that
    the machine's load does not decide the test (benchmarks/bench_real_logs.py gives the figures)."""
    started = time.perf_counter()
    read_log(io.StringIO(text))
    return time.perf_counter() - started


@pytest.mark.parametrize(
    ("name", "world"),
    [
        ("torch19_no_seqnum.log", 4),
        ("torch24_pg_desc.log", 8),
        ("deepspeed_launcher.log", 4),
        ("init_options_last_rank.log", 8),
        ("lightning_last_rank.log", 4),
        ("accelerate_last_rank.log", 8),
    ],
)
def test_the_world_is_read_from_the_launchers_lines(name: str, world: int) -> None:
    analysis = analyze([str(LOGS / name)])
    assert (analysis.world, analysis.world_from) == (world, "the log")


def test_a_traceback_is_the_ranks_last_words_with_its_frames() -> None:
    analysis = analyze([str(LOGS / "traceback_oom_16.log")])
    raised = analysis.monitor.state.ranks[11].report.exception
    assert raised is not None and raised.type == "torch.OutOfMemoryError"
    assert raised.where is not None and raised.where.func == "backward" and raised.where.line == 347
    assert [f.func for f in raised.traceback] == ["<module>", "main", "backward", "backward"]
    assert raised.traceback[1].code == "loss.backward()"
    consequence = analysis.monitor.state.ranks[0].report.exception
    assert consequence is not None and consequence.type == "torch.distributed.DistBackendError"


def test_the_launchers_last_command_names_no_rank() -> None:
    """DeepSpeed prints the last command it started with the failed one's return code."""
    analysis = analyze([str(LOGS / "deepspeed_launcher.log")])
    assert 3 in analysis.ranks and analysis.missing == {2: "no line in the log"}


def test_a_control_character_in_a_log_is_never_echoed() -> None:
    log = "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: \x1b]0;owned\x07 \x1b[2J\n"
    facts = read_log(io.StringIO(log))
    message = facts.raised[1].message
    assert "\x1b" not in message and "\x07" not in message and "\\x1b" in message


def traceback(rank: int, frames: int, last: str) -> str:
    lines = [f"[rank{rank}]: Traceback (most recent call last):"]
    for k in range(frames):
        lines += [f'[rank{rank}]:   File "/x/deep.py", line {k + 1}, in f{k}', f"[rank{rank}]:     f{k + 1}()"]
    return "\n".join([*lines, f"[rank{rank}]: {last}"])


def test_a_deep_traceback_keeps_its_innermost_frames() -> None:
    raised = read_log(io.StringIO(traceback(0, 500, "RecursionError: maximum recursion depth exceeded"))).raised[0]
    assert raised.type == "RecursionError" and len(raised.frames) == 64 and raised.frames[-1].func == "f499"


def test_a_word_the_rank_printed_amid_its_traceback_is_not_its_exception() -> None:
    log = traceback(3, 2, "KeyboardInterrupt").replace("[rank3]:     f1()", "[rank3]: Epoch")
    assert read_log(io.StringIO(log)).raised[3].type == "KeyboardInterrupt"


def test_sends_and_receives_are_not_compared_for_the_rank_behind() -> None:
    """Their numbers count point-to-point ops, apart on each rank: the lower is not behind."""
    line = (
        "[rank{r}]:[E1124 03:12:44.1 ProcessGroupNCCL.cpp:632] [PG ID 1 PG GUID 5(PIPELINE_MODEL_PARALLEL_GROUP) "
        "Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
    )
    log = "\n".join([line.format(r=0, seq=40, op="SEND"), line.format(r=1, seq=38, op="RECV")])
    assert standings.statuses(read_log(io.StringIO(log)), 2, 0.0) == {}, "no place against the peers"
    verdict = assign_blame(analyze_text(log))
    assert not verdict.culprits and "ranks 0-1 wait in sends or receives" in verdict.headline
    same = "\n".join([line.format(r=0, seq=40, op="SEND"), line.format(r=1, seq=40, op="RECV")])
    assert len(standings.statuses(read_log(io.StringIO(same)), 2, 0.0)) == 2, "one number: one place"


def test_a_line_that_starts_a_record_is_never_joined_to_a_wrapped_one() -> None:
    cut = "[E ProcessGroupNCCL.cpp:916] [Rank 7] NCCL watchdog thread terminated with exception: Watchdog caught "
    whole = (
        "  what():  [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
        "Timeout(ms)=1) ran for 5 milliseconds before timing out."
    )
    facts = read_log(io.StringIO(f"{cut}\n{whole}\n"))
    assert sorted(facts.timeouts) == [3]
    warned = "[rank5]:[W305 10:00:00.1 ProcessGroupNCCL.cpp:1538] Warning: destroy_process_group() was not called"
    agent = "10:00:01.000 W0305 10:00:01.000000 4200 torch/distributed/elastic/multiprocessing/api.py:900] Sending"
    closing = read_log(io.StringIO(f"{warned}\n{agent} process 4202 closing signal SIGTERM\n")).closed
    assert closing == {4202}, "glog's header after a logger's stamp starts a record"


def analyze_text(text: str) -> Analysis:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.log").write_text(text, errors="surrogatepass")
        return analyze([folder])


def test_wrapped_lines_without_padding_are_joined_too() -> None:
    lines = (LOGS / "wrapped_padded.log").read_text().splitlines()
    assert culprits(analyze_text("\n".join(line.rstrip() for line in lines))) == [2]


def test_an_nccl_warning_before_torchruns_table_leaves_the_table_whole() -> None:
    """A line of ProcessGroupNCCL's that is no watchdog message is joined to nothing that
    follows it but the rest of a wrap."""
    table = (LOGS / "childfailed_root_cause.log").read_text()
    warning = (
        "[rank0]:[W0214 08:41:07.000000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT "
        "been destroyed before we destruct ProcessGroupNCCL. (function operator())"
    )
    text = table.replace("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", f"{warning}\nfailed:")
    assert "rank 3 raised ValueError" in analysis_summary(analyze_text(text))


def test_a_root_cause_that_timed_out_like_its_peers_is_no_failure_of_its_own() -> None:
    text = (LOGS / "childfailed_sigkill.log").read_text()
    timed_out = (
        "[rank5]:[E0214 09:00:15.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
        "Timeout at NCCL work: 77, last enqueued NCCL work: 78, last completed NCCL work: 76."
    )
    analysis = analyze_text(text.replace("torch.distributed.elastic", f"{timed_out}\ntorch.distributed.elastic", 1))
    assert 5 not in analysis.monitor.state.ranks or analysis.monitor.state.ranks[5].report.exception is None
    assert "raised" not in analysis_summary(analysis)


def test_a_groups_initialization_lines_give_its_members() -> None:
    """Rank 7, the last of its tensor-parallel group, never timed out: its start names it a member."""
    analysis = analyze([str(LOGS / "init_options_last_rank.log")])
    tp = next(g for g in analysis.ranks[4].groups if g.id == "2")
    assert (tp.size, tp.ranks) == (4, [[4, 4, 1]])
    assert all(7 in a.ranks for a in analysis.alerts)


def test_a_watchdog_line_of_no_known_rank_makes_a_job_log_said_so() -> None:
    line = (
        "(VllmWorkerProcess pid=4321) [E1124 03:12:44.1 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 3 Rank 1] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1) ran for 9 ms"
    )
    analysis = analyze_text(line)
    assert analysis.logs == 1
    assert analysis.problems == ["1 watchdog lines name no global rank (no [rankN]: prefix): left out"]
    assert "rank 1 of group 3: all_reduce #5" in analysis_summary(analysis)


def test_after_a_restart_a_ranks_last_line_counts() -> None:
    line = (
        "[rank0]:[E1124 0{h}:00:00.0 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {done}."
    )
    log = "\n".join([line.format(h=1, seq=5000, done=4999), line.format(h=3, seq=12, done=11)])
    [status] = standings.statuses(read_log(io.StringIO(log)), 1, 0.0)[0]
    assert (status.enqueued, status.completed) == (12, 11)


# Shapes /work/shared/nccl-formats.md lists that no fixture holds yet: lines made up after its
# examples, each test saying which rule it proves.
CAUGHT = (
    "[E ProcessGroupNCCL.cpp:458] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
    "OpType=ALLREDUCE, Timeout(ms)={ms}) ran for {ran} milliseconds before timing out."
)


def test_the_python_side_timeout_is_a_wait_and_a_consequence_in_a_sentence_too() -> None:
    """torch 1.12-2.0 with blocking wait raises it in Python; quoted in prose, it is still read."""
    log = (
        "RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=143, OpType=BROADCAST, "
        "TensorShape=[1], Timeout(ms)=3600000) ran for 3600089 milliseconds before timing out.\n"
        "We then saw `[Rank 2] Caught collective operation timeout: WorkNCCL(SeqNum=143, OpType=BROADCAST, "
        "TensorShape=[1], Timeout(ms)=3600000) ran for 3600090 milliseconds before timing out.` on the other node\n"
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [0]
    assert "ranks 1-2 wait in collective #143 (broadcast)" in verdict.headline and "1h00m" in verdict.headline
    assert PEER_LOST.search("[Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=143, OpType=BROADCAST")


def test_a_timeout_set_absurdly_low_blames_nobody() -> None:
    log = "\n".join(CAUGHT.format(r=r, seq=9 + r, ms=1, ran=5) for r in range(3))
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and verdict.suspects == [] and verdict.nobody is not None
    assert "Timeout(ms)=1" in verdict.nobody and "configuration" in verdict.nobody


def test_every_rank_in_one_collective_together_blames_nobody() -> None:
    log = "  global_world_sizes=[4, 4, 4, 4]\n" + "\n".join(
        f"[rank{r}]:[E1124 03:12:44.{r}00000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=4, "
        "NumelOut=4, Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
        for r in range(4)
    )
    analysis = analyze_text(log)
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and verdict.suspects == [] and verdict.nobody is not None
    assert "within 0.3s of each other" in verdict.nobody and "transport" in verdict.nobody
    assert "unless the job has more" not in verdict.nobody, "the world is the launcher's, not a guess"
    assert "NOBODY TO BLAME" in render_analysis(analysis)


def test_every_rank_in_the_first_collective_blames_the_network() -> None:
    """The first collective, which every rank issued, completed nowhere: they never reached
    each other."""
    log = "  global_world_sizes=[2, 2]\n" + "\n".join(
        f"[rank{r}]:[E1124 03:12:44.{r}00000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out."
        for r in range(2)
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and verdict.suspects == [] and verdict.nobody is not None
    assert "collective #1 (all_reduce)" in verdict.nobody and "never reached each other" in verdict.nobody


def test_launcher_labels_are_no_ranks() -> None:
    """srun's task label and a host with its local rank stand before torchrun's prefix."""
    log = "\n".join(
        [
            "0: [rank0]:[E1124 03:12:44.1 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
            "Timeout at NCCL work: 9, last enqueued NCCL work: 9, last completed NCCL work: 8.",
            "[node12:5]: [rank5]:[E1124 03:12:44.1 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
            "Timeout at NCCL work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.",
            "1: [rank3]: Traceback (most recent call last):",
            '1: [rank3]:   File "/job/train.py", line 12, in <module>',
            "1: [rank3]: ValueError: bad shard",
        ]
    )
    analysis = analyze_text(log)
    assert sorted(analysis.log.seen) == [0, 3, 5]
    assert assign_blame(analysis).culprits == [3] and analysis.log.raised[3].type == "ValueError"


def test_a_traceback_cut_before_its_exception_line_is_the_first_cause() -> None:
    log = "\n".join(
        [
            "[rank2]: Traceback (most recent call last):",
            '[rank2]:   File "/job/train.py", line 40, in <module>',
            "[rank2]:     main()",
            '[rank2]:   File "/job/train.py", line 33, in main',
            "[rank2]:     loss = model(batch)",
            *(
                f"[rank{r}]:[E1124 03:22:44.1 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}] "
                "Timeout at NCCL work: 50, last enqueued NCCL work: 50, last completed NCCL work: 49."
                for r in (0, 1, 3)
            ),
        ]
    )
    analysis = analyze_text(log)
    verdict = assign_blame(analysis)
    assert verdict.culprits == [2], render_analysis(analysis)
    assert analysis.log.raised[2].cut and analysis.log.raised[2].frames[-1].func == "main"


def test_a_cut_traceback_in_a_collective_call_is_no_cause() -> None:
    """A rank that raised inside a collective waited: its cut traceback proves nothing of it."""
    log = "\n".join(
        [
            "[rank2]: Traceback (most recent call last):",
            '[rank2]:   File "/job/train.py", line 40, in <module>',
            '[rank2]:   File "/py/torch/distributed/distributed_c10d.py", line 2421, in broadcast',
            "[rank2]:     work = group.broadcast([tensor], opts)",
        ]
    )
    assert read_log(io.StringIO(log)).raised == {}


def test_interleaved_tracebacks_without_prefixes_are_read_and_their_exception_placed_where_one_rank_is_left() -> None:
    log = "\n".join(
        [
            *(CAUGHT.format(r=r, seq=77, ms=600000, ran=600100) for r in (0, 2, 3)),
            "Traceback (most recent call last):",
            "Traceback (most recent call last):",
            '  File "/job/train.py", line 9, in <module>',
            '  File "/job/train.py", line 9, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            "RuntimeError: NCCL communicator was aborted on rank 2.",
        ]
    )
    analysis = analyze_text(log)
    assert [r.type for r in analysis.log.unplaced] == ["torch.OutOfMemoryError", "RuntimeError"]
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and verdict.suspects[0].rank == 1
    assert "torch.OutOfMemoryError: CUDA out of memory" in verdict.suspects[0].why


def test_a_group_rank_is_not_the_global_rank() -> None:
    log = (
        "[rank4]:[E1124 03:12:44.1 ProcessGroupNCCL.cpp:1785] [PG ID 5 PG GUID 5(TENSOR_MODEL_PARALLEL_GROUP) Rank 0] "
        "Timeout at NCCL work: 21, last enqueued NCCL work: 21, last completed NCCL work: 20."
    )
    facts = read_log(io.StringIO(log))
    [timeout] = facts.timeouts[4].values()
    assert (timeout.group, timeout.desc, timeout.local) == ("5", "TENSOR_MODEL_PARALLEL_GROUP", 0)


def test_a_stray_character_or_colour_code_before_a_line_hides_nothing() -> None:
    log = "\n".join(
        [
            "`[36m(RayWorkerWrapper pid=9) [rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: "
            "3, last enqueued NCCL work: 3, last completed NCCL work: 2.",
            "x[E ProcessGroupNCCL.cpp:458] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
            "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
        ]
    )
    assert sorted(read_log(io.StringIO(log)).timeouts) == [1, 2]


def test_torchruns_failure_table_bounds_the_world() -> None:
    """Its ranks are global: a rank it lists exists, though the log shows none of its lines."""
    table = "\n".join(
        [
            CAUGHT.format(r=1, seq=5, ms=600000, ran=600100),
            "Failures:",
            "[1]:",
            "  time      : 2024-09-11_09:17:37",
            "  rank      : 6 (local_rank: 6)",
            "  exitcode  : -6 (pid: 886327)",
        ]
    )
    analysis = analyze_text(table)
    assert (analysis.world, analysis.world_from) == (7, "the log")


def test_the_workers_torchruns_agent_closes_bound_the_world() -> None:
    """Closing the workers left beside one that ended (or all of them, on a signal of its own), torchrun's agent
    names each by its pid: as many ranks at least, though the log shows none of their lines."""
    closing = "W0305 10:00:01.000000 4200 torch/distributed/elastic/multiprocessing/api.py:900] Sending process {pid} "
    closed = "".join(closing.format(pid=pid) + "closing signal SIGTERM\n" for pid in (4202, 4203, 4204))
    ended = (
        "E0305 10:00:02.000000 4200 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) "
        "local_rank: 0 (pid: 4201) of binary: /usr/bin/python3\n"
    )
    assert (analyze_text(closed + ended).world, analyze_text(closed).world) == (4, 3)
    wrapped = closed.replace("4204 closing", "4204\nclosing", 1)  # a terminal's wrap past the pid
    assert analyze_text(wrapped + ended).world == 4


SUBGROUP_WAIT = (
    "[rank{r}]:[E0703 09:15:02.{r}00 ProcessGroupNCCL.cpp:1785] [PG ID 3 PG GUID 3 Rank {local}] Timeout at NCCL "
    "work: 212, last enqueued NCCL work: 212, last completed NCCL work: 211."
)


def test_a_cut_traceback_beside_ranks_waiting_in_a_subgroup_is_the_first_suspect_and_the_verdict_is_one() -> None:
    """Rank 5 raised (its traceback cut before its exception line) while ranks 4, 6, 7 waited in
    a group the log does not lay out: it is suspected first, with its frame, ahead of ranks of
    which the log says nothing; the verdict does not also clear everyone, nor add a second
    voice saying the same."""
    log = "\n".join(
        [
            "[rank5]: Traceback (most recent call last):",
            '[rank5]:   File "/srv/job/loop.py", line 88, in <module>',
            '[rank5]:   File "/srv/job/loop.py", line 61, in step',
            "[rank5]:     grads = shard.pull(batch)",
            *(SUBGROUP_WAIT.format(r=r, local=r - 4) for r in (4, 6, 7)),
        ]
    )
    analysis = analyze_text(log)
    verdict = assign_blame(analysis)
    assert verdict.nobody is None and verdict.culprits == []
    assert verdict.suspects[0].rank == 5 and "in step (/srv/job/loop.py:61)" in verdict.suspects[0].why
    assert "suspected: rank 5 (it raised in step" in verdict.headline
    shown = render_analysis(analysis)
    assert "SUSPECTED rank 5" in shown and "Also:" not in shown and "follow from it" not in shown


def first_wait(rank: int, op: str = "ALLREDUCE") -> str:
    return (
        f"[rank{rank}]:[E0703 09:15:02.1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=1, OpType={op}, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600007 "
        "milliseconds before timing out.\n"
        f"[rank{rank}]:[E0703 09:15:02.2 ProcessGroupNCCL.cpp:2289] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  "
        "failure detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: 0"
    )


def test_the_first_collective_never_completed_with_one_ranks_lines_is_a_set_up_fault() -> None:
    """NCCL makes a group's communicator at its first collective, once every member called it: a
    rank timing out in collective #1 with nothing completed shows that every rank issued it,
    whichever ranks the log shows. Nobody is blamed; what to check is said."""
    verdict = assign_blame(analyze_text("  global_world_sizes=[4, 4, 4, 4]\n" + first_wait(2)))
    assert verdict.culprits == [] and verdict.suspects == [] and verdict.nobody is not None
    for words in ("rank 2 waits in collective #1 (all_reduce)", "set-up fault", "NCCL_P2P_DISABLE=1", "ACS", "iommu"):
        assert words in verdict.nobody, words
    assert "device_id" in verdict.nobody, "ranks the log does not show: the eager communicator is said"
    assert assign_blame(analyze_text(first_wait(1, "SEND"))).nobody is None, "a pair's send: the program's order"
    failed = "[rank0]: Traceback (most recent call last):\n[rank0]: OSError: no such file\n" + first_wait(1)
    assert assign_blame(analyze_text(failed)).culprits == [0], "a rank that raised is the cause, not the set-up"


def test_a_store_wait_beside_a_progress_bar_still_moving_suspects_the_busy_rank() -> None:
    """Rank 2 timed out waiting in c10d's store while a bar no rank labels (the main process's)
    still ran: rank 2 waited, the busy rank is suspected first; rank 2 is no culprit."""
    log = "\n".join(
        [
            "Tokenizing shards:  61%|██████    | 6100/10000 [29:58<18:40, 3.48it/s]",
            "[rank2]:[W703 09:15:02.100 socket.cpp:464] [c10d] waitForInput: poll for socket SocketImpl(fd=41, "
            "addr=[localhost]:50112, remote=[localhost]:29500) returned 0, likely a timeout",
            "[rank2]: Traceback (most recent call last):",
            '[rank2]:   File "/srv/job/prep.py", line 12, in <module>',
            "[rank2]: torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//0//cuda//0",
        ]
    )
    analysis = analyze_text(log)
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and verdict.nobody is None
    assert [s.rank for s in verdict.suspects] == [0, 1], "the busy rank, then the one the log does not show"
    assert "61% (6100/10000) after 29:58" in verdict.suspects[0].why
    assert "rank 2 timed out waiting in c10d's store for another rank" in verdict.headline
    assert "0 ranks" not in render_analysis(analysis)


def test_a_store_wait_in_torchruns_own_traceback_is_its_agents_rendezvous_no_ranks() -> None:
    """torchrun's agent meets the other nodes' in the store before it starts a worker: its wait
    timing out is the set-up's, and no rank (rank 0 busy alone) is suspected."""
    wait = (
        "[W903 11:02:07.000000000 socket.cpp:462] [c10d] waitForInput: poll for socket SocketImpl(fd=9, "
        "addr=[n2]:40110, remote=[n1]:29400) returned 0, likely a timeout"
    )
    frames = [
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 922, in main',
        "    run(args)",
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 255, in launch_agent',
        "    result = agent.run()",
    ]
    verdict = assign_blame(analyze_text("\n".join([wait, *frames])))
    assert verdict.nobody is not None and verdict.suspects == []
    assert "torchrun's agent timed out in the c10d store of its rendezvous before any worker started" in verdict.nobody
    worker = '  File "/srv/job/train.py", line 40, in main'
    assert assign_blame(analyze_text("\n".join([wait, frames[0], worker]))).suspects, "a worker's wait: a rank's"
    restart = '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 700, in '
    again = "\n".join([wait, *frames, restart + "_restart_workers"])
    assert assign_blame(analyze_text(again)).nobody is None, "a restart's rendezvous: its workers had run"
    failed = "failed (exitcode: -11) local_rank: 2 (pid: 4242) of binary: /usr/bin/python"
    assert assign_blame(analyze_text("\n".join([failed, wait, *frames]))).nobody is None, "the log shows a worker"


def test_a_store_wait_names_the_rank_it_waited_for() -> None:
    """The communicator's set-up names its root: the waiter waited for it."""
    log = (
        "[rank3]: RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Socket Timeout"
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects][:1] == [0]
    assert "ncclUniqueId" in verdict.suspects[0].why and 3 not in [s.rank for s in verdict.suspects]


def test_a_subgroups_store_wait_names_no_global_rank() -> None:
    """Its ``[1] ... from [0]`` are ranks of a subgroup where the rank's prefix says another: global
    rank 0 is not the one awaited."""
    log = (
        "[rank5]: RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Socket Timeout"
    )
    analysis = analyze_text(log)
    assert analysis.log.stores.waiters() == {5} and analysis.log.stores.awaited() == []
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and all(s.why == "no line in the log" for s in verdict.suspects), "no habit"
    assert verdict.leading == [0, 1, 2, 3, 4] and "suspected: ranks 0-4, none more than another" in verdict.headline
    prefixed = (
        "[rank1]:[E1015 10:01:02.000000000 ProcessGroupNCCL.cpp:2215] [PG ID 3 PG GUID 3(tp) Rank 1] [1] is setting "
        "up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: Socket Timeout"
    )
    assert analyze_text(prefixed).log.stores.awaited() == [0], "its group's first ranks are the world's 0 and 1"
    polled = "[rank5]: [c10d] waitForInput: poll for socket SocketImpl(fd=7) returned 0, likely a timeout\n"
    verdict = assign_blame(analyze_text(polled + log))
    assert verdict.leading == [0, 1, 2, 3, 4], "a wait the line does not place is not the world's"
    higher = assign_blame(analyze_text(log + "\n[rank7]: step 9 done\n"))
    assert 6 not in [s.rank for s in higher.suspects], "its group's root is among ranks 0-4: new_group sorts them"


def test_rank_0_is_not_suspected_by_habit_in_another_group_than_the_worlds() -> None:
    """Rank 0 works alone in the world group (saving, evaluating); in a tensor-parallel group it has no
    part another rank lacks: the ranks the log does not show are suspected alike."""
    desync = (
        "[rank4]:[E1015 10:31:33.123456789 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 5(tp) Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=1800000) ran for 1800100 milliseconds before timing out.\n"
    )
    verdict = assign_blame(analyze_text(desync))
    assert all("most often works alone" not in s.why for s in verdict.suspects), verdict.suspects
    world = assign_blame(
        analyze_text(desync.replace("PG ID 2 PG GUID 5(tp) Rank 0", "PG ID 0 PG GUID 0(default_pg) Rank 4"))
    )
    assert "most often works alone" in world.suspects[0].why and world.leading == [0]


def test_the_communicators_set_up_message_at_a_lines_start_keeps_its_rank() -> None:
    """torch's ``[3] is setting up NCCL communicator ...`` is rank 3's, not a pasted file's line 3,
    where it starts a line or a terminal's wrap put it there."""
    message = (
        "[3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key "
        "'0', but store->get('0') got error: Socket Timeout"
    )
    for log in (message, "RuntimeError: " + message):
        analysis = analyze_text(log)
        assert analysis.log.stores.waiters() == {3} and analysis.log.stores.awaited() == [0], log


def test_a_barrier_inside_main_process_first_waits_for_the_main_process() -> None:
    """A traceback no rank prefixes, cut in the barrier of ``main_process_first``: a process waited
    while the main one ran the block first."""
    log = "\n".join(
        [
            "Mapping rows:  47%|████▋     | 47000/100000 [30:00<33:50, 26.1 rows/s]Traceback (most recent call last):",
            '  File "/srv/job/sft.py", line 30, in main',
            "    with args.main_process_first(desc='map'):",
            '  File "/py/transformers/training_args.py", line 2400, in main_process_first',
            "    dist.barrier()",
            '  File "/py/torch/distributed/distributed_c10d.py", line 4100, in barrier',
            "    work = group.barrier(opts=opts)",
        ]
    )
    verdict = assign_blame(analyze_text(log))
    assert [s.rank for s in verdict.suspects] == [0] and "main_process_first" in verdict.suspects[0].why
    assert "47% (47000/100000)" in verdict.suspects[0].why and verdict.nobody is None
    entering = [
        *log.split("\n")[:3],
        '  File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__',
        "    return next(self.gen)",
    ]
    cut = analyze_text("\n".join(entering))  # cut as it entered the block: the main one yields at once
    assert [s.rank for s in assign_blame(cut).suspects] == [0] and cut.log.matched
    other = "\n".join(entering).replace("args.main_process_first(desc='map')", "open(path)")
    assert analyze_text(other).log.stores.main_first == [], "entering another block waits for nobody"
    bare = "\n".join(entering).replace("args.main_process_first(desc='map')", "torch_distributed_zero_first(RANK)")
    assert analyze_text(bare).log.stores.main_first == [(None, "torch_distributed_zero_first")]
    prefixed = "".join(f"[rank3]: {line}\n" for line in entering[1:])
    verdict = assign_blame(analyze_text(prefixed))
    assert [s.rank for s in verdict.suspects][:1] == [0] and "rank 3 waited in a barrier" in verdict.headline
    node = (
        "[rank8]:"
        + log.split("\n")[0].split("Traceback")[0]
        + "\n"
        + "[rank0]:Mapping rows: 100%|██| 9/9 [0:01<0:00]\n"
    )
    verdict = assign_blame(analyze_text(node + prefixed.replace("rank3", "rank9")))
    assert [s.rank for s in verdict.suspects][:1] == [8], "a node's own main process, its bar still short"


def test_no_summary_says_zero_ranks() -> None:
    log = "Traceback (most recent call last):\n  File \"run.py\", line 2, in <module>\nKeyError: 'x'\nNCCL WARN oops"
    shown = render_analysis(analyze_text(log))
    assert "0 ranks" not in shown and "it names no rank" in shown


def rank0_waits(seq: int, enqueued: int) -> str:
    return (
        f"[rank0]:[E0703 09:15:02.1 ProcessGroupNCCL.cpp:2289] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure "
        f"detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {enqueued}, last completed "
        f"work: {seq - 1}"
    )


def test_rank0_alone_waiting_suspects_the_others_first() -> None:
    """Only rank 0's lines: it waited, so the others come first, rank 0 (alone in a collective only
    it calls) after; a rank 0 that went on enqueuing is not suspected at all; after the training
    loop ended, or in a world of more ranks none of which printed its wait, rank 0 alone comes
    first."""
    suspects = lambda log: [s.rank for s in assign_blame(analyze_text(log)).suspects]  # noqa: E731
    assert suspects(rank0_waits(77, 77)) == [1, 0]
    assert suspects(rank0_waits(77, 90)) == [1], "it enqueued 13 more: in its own loop, waiting for the other"
    assert suspects("`Trainer.fit` stopped: `max_epochs=3` reached.\n" + rank0_waits(77, 77))[:1] == [0]
    assert suspects("  global_world_sizes=[4, 4, 4, 4]\n" + rank0_waits(77, 77))[:1] == [0]


def test_rank0_alone_waiting_inside_work_the_main_process_does_alone_comes_first() -> None:
    """Only rank 0's lines, its wait after the main process's logger said it began uploading to the hub, or its
    traceback cut in the all-reduce inside a save every rank must call: rank 0 comes first, with that work said. An
    announcement after the timeout, or a traceback through no such work, leaves the others first."""
    suspects = lambda log: assign_blame(analyze_text(log)).suspects  # noqa: E731
    announced = "2026-03-02 04:05:06 - INFO - trainer - Pushing model to the Hub...\n"
    first = suspects(announced + rank0_waits(77, 77))
    assert [s.rank for s in first][:1] == [0] and "`Pushing model to the Hub...`" in first[0].why
    assert [s.rank for s in suspects(rank0_waits(77, 77) + "\n" + announced)] == [1, 0], "said after: not its wait"
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 51, in <module>\n'
        "    engine.save_checkpoint(out, tag)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 3120, in save_checkpoint\n'
        "    self._checkpoint_tag_validation(tag)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2050, in '
        "all_reduce\n"
    )
    inside = suspects(rank0_waits(77, 77) + "\n" + traceback)
    assert [s.rank for s in inside][:1] == [0] and "inside save_checkpoint (engine.py:3120)" in inside[0].why
    elsewhere = traceback.replace("save_checkpoint", "train_step").replace("_checkpoint_tag_validation", "step")
    assert [s.rank for s in suspects(rank0_waits(77, 77) + "\n" + elsewhere)] == [1, 0]


def test_a_store_waiters_own_traceback_is_its_wait() -> None:
    """Rank 3 waited in the store and its traceback (cut before its exception line) is that wait:
    it is not suspected for it; the rank the bar shows working is."""
    log = "\n".join(
        [
            "Packing:  35%|███▌      | 350/1000 [30:01<55:40, 5.1s/it]",
            "[rank3]:[W703 09:15:02.1 socket.cpp:464] [c10d] waitForInput: poll for socket SocketImpl(fd=9, "
            "addr=[localhost]:41000, remote=[localhost]:29500) returned 0, likely a timeout",
            "[rank3]: Traceback (most recent call last):",
            '[rank3]:   File "/srv/job/pack.py", line 7, in <module>',
        ]
    )
    verdict = assign_blame(analyze_text(log))
    assert [s.rank for s in verdict.suspects][:1] == [0] and 3 not in [s.rank for s in verdict.suspects]


def test_a_store_wait_no_rank_prefixes_suspects_rank_0_by_habit() -> None:
    """A process timed out waiting in the store and the log names no rank: rank 0, which most often
    works alone while the others wait, is suspected, as where ranks wait in a collective."""
    log = "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//0//cuda//0"
    verdict = assign_blame(analyze_text(log))
    assert [s.rank for s in verdict.suspects] == [0] and "works alone" in verdict.suspects[0].why
    assert "a process timed out waiting in c10d's store" in verdict.headline


def test_a_store_wait_in_a_spawned_process_is_that_process_s() -> None:
    """``mp.spawn`` prints process 2's traceback under its heading: the store wait in it is process 2's."""
    log = "\n".join(
        [
            "-- Process 2 terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "/py/torch/multiprocessing/spawn.py", line 69, in _wrap',
            "RuntimeError: Socket Timeout",
        ]
    )
    analysis = analyze_text(log)
    assert analysis.log.stores.waiters() == {2}
    assert 2 not in [s.rank for s in assign_blame(analysis).suspects]


def test_a_rank_known_only_from_a_launchers_line_gets_no_process_or_step_it_was_not_seen_at() -> None:
    """A report read from a log has no process of its own and no step: the culprit's words say
    what the line says (its rank, how it ended), not ``pid 0`` or ``at step 0``."""
    text = (
        "mpirun noticed that process rank 2 with PID 4121 on node gpu-07 exited on signal 11 (Segmentation fault).\n"
        "3 total processes killed (some possibly by mpirun during cleanup)\n"
    )
    shown = render_analysis(analyze_text(text))
    assert "rank 2" in shown, shown
    assert "pid 0" not in shown and "step 0" not in shown, shown


P2P_LOST = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/pipeline/stage.py", line 88, in <module>
[rank1]:     run_stage(args)
[rank1]:   File "/work/pipeline/stage.py", line 41, in run_stage
[rank1]:     work = dist.irecv(activations, src=2)
[rank1]:   File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 2101, in irecv
[rank1]:     return pg.recv([tensor], src, tag)
[rank1]: RuntimeError: [gloo/transport/tcp/pair.cc:534] Read error [10.1.2.3]:40771: Connection reset by peer
"""


def test_a_connection_closed_under_a_receive_suspects_the_peer_the_programs_line_names() -> None:
    """The rank that lost its peer is a witness; the peer its own line of code received from (a
    number there, not a variable) ended first: the first suspect, proven by no line."""
    analysis = analyze_text(P2P_LOST)
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and verdict.nobody is None
    lead = verdict.suspects[0]
    assert lead.rank == 2 and "dist.irecv(activations, src=2)" in lead.why and "stage.py:41" in lead.why, lead
    assert analysis.world == 3, "the peer named is a rank of the job"
    unnamed = assign_blame(analyze_text(P2P_LOST.replace("src=2", "src=upstream")))
    assert all("stage.py" not in s.why for s in unnamed.suspects), unnamed.suspects


def test_a_rank_a_launcher_says_died_of_a_signal_is_told_as_a_crash_not_an_exception_to_fix() -> None:
    """Killed by a signal, it left no traceback to fix: what to do is where a native crash is told."""
    text = "mpirun noticed that process rank 2 with PID 4121 on node gpu-07 exited on signal 11 (Segmentation fault).\n"
    shown = render_analysis(analyze_text(text))
    assert "died of a signal" in shown and "dmesg" in shown, shown
    assert "fix the error above" not in shown and "its lines prefixed" not in shown, shown


def test_a_log_that_begins_with_a_json_object_is_read_as_a_log(tmp_path: Path) -> None:
    """A paste may begin with a model's config, a JSON object without a Flight Recorder dump's keys."""
    config = '{\n  "bos_token_id": 1,\n  "transformers_version": "4.29.2"\n}\n'
    line = "failed (exitcode: -9) local_rank: 2 (pid: 4243) of binary: /usr/bin/python\n"
    (tmp_path / "job.log").write_text(config + line)
    analysis = analyze([str(tmp_path / "job.log")])
    assert analysis.logs == 1 and not analysis.problems
    assert [s.rank for s in assign_blame(analysis).suspects] == [2]


LOG_DIR = LOGS / "torchrun-log-dir"
"""What torch 2.13's torchrun wrote with ``--log-dir --redirects 3``, one restart: rank 1 raised on both attempts
(``tests/data/logs/torchrun-log-dir.md`` says how)."""


def test_a_torchrun_log_folder_is_judged_on_its_last_attempt() -> None:
    """Each worker's files are its own (since torch 2.2 their lines carry ``[rankN]:``); the first attempt's
    are not read, which is said; ``error.json`` beside ``stderr.log`` is not read twice."""
    analysis = analyze([str(LOG_DIR)])
    assert culprits(analysis) == [1] and analysis.logs == 4 and analysis.problems == []
    assert analysis.log.restarts == [
        "torchrun restarted the workers once (none_s_tn2hgr): judged on its last attempt's files (attempt_1), "
        "the earlier attempts' are not read"
    ]
    assert "rank 1 raised FileNotFoundError: [Errno 2] No such file or directory" in render_analysis(analysis)


def test_a_workers_error_file_alone_tells_its_exception(tmp_path: Path) -> None:
    """Without ``--redirects`` the folder holds each worker's ``error.json`` (``@record``'s) alone: its
    traceback is read as the worker's lines, its local rank the rank (one node)."""
    for error in LOG_DIR.glob("*/attempt_1/*/error.json"):
        copy = tmp_path / error.relative_to(LOG_DIR)
        copy.parent.mkdir(parents=True)
        copy.write_bytes(error.read_bytes())
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [1] and analysis.logs == 2
    text = render_analysis(analysis)
    assert "your code: /tmp/ld/train.py:12 in load_shard" in text
    assert "judged as of 2026-12-06 21:24:48 (the log's clock)" in text  # when the workers raised, as it says


def test_an_older_torchruns_unlabelled_worker_file_is_its_local_rank(tmp_path: Path) -> None:
    """Before torch 2.2 a worker's lines in the folder carry no label: they are its local rank's (where its own
    lines say its global rank, as the watchdog's ``[Rank 11]``, placed on its node as ``--tee``'s are)."""
    worker = tmp_path / "run_x" / "attempt_0" / "3" / "stderr.log"
    worker.parent.mkdir(parents=True)
    worker.write_text(
        'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    step()\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    analysis = analyze([str(tmp_path)])
    assert [s.rank for s in assign_blame(analysis).suspects] == [3] and analysis.log.unplaced == []


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000, b'{"message": [1]}', b'{"message": {"extraInfo": 7}}', b"7", b'{"message": "\\ud800"}', b"\xff{"],
)
def test_a_hostile_error_file_is_read_as_text_or_not_at_all(tmp_path: Path, raw: bytes) -> None:
    error = tmp_path / "run" / "attempt_0" / "2" / "error.json"
    error.parent.mkdir(parents=True)
    error.write_bytes(raw)
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [] and analysis.log.unplaced == []


EXPORTED = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/app/train.py", line 61, in main',
    "[rank1]:     batch = next(it)",
    "[rank1]: OSError: [Errno 5] Input/output error: '/mnt/data/shard-00017.tar'",
    "[rank0]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out.",
]


@pytest.mark.parametrize(
    "export",
    [
        # Google Cloud Logging's export, a JSON array printed indented
        lambda: json.dumps(
            [{"textPayload": line, "resource": {"type": "k8s_container"}} for line in EXPORTED], indent=2
        ),
        # one entry a line, the text in jsonPayload.message
        lambda: "".join(
            json.dumps({"jsonPayload": {"message": line}, "timestamp": f"2026-11-24T03:12:44.{i:06d}Z"}) + "\n"
            for i, line in enumerate(EXPORTED)
        ),
        # Docker's json-file log
        lambda: "".join(
            json.dumps({"log": line + "\n", "stream": "stderr", "time": f"2026-11-24T03:12:44.{i:09d}Z"}) + "\n"
            for i, line in enumerate(EXPORTED)
        ),
        # one entry holding the traceback whole, its lines apart
        lambda: (
            json.dumps({"jsonPayload": {"message": "\n".join(EXPORTED[:4])}, "timestamp": "2026-11-24T03:12:40Z"})
            + "\n"
            + json.dumps({"jsonPayload": {"message": EXPORTED[4]}})
            + "\n"
        ),
    ],
    ids=["cloud logging array", "json lines", "docker json-file", "a traceback in one entry"],
)
def test_a_log_exported_as_json_is_read_as_the_job_wrote_it(tmp_path: Path, export: Callable[[], str]) -> None:
    """Each line of the job an entry of its own: the exception read whole with its frame, no JSON in its words."""
    (tmp_path / "export.json").write_text(export())
    analysis = analyze([str(tmp_path / "export.json")])
    text = render_analysis(analysis)
    assert culprits(analysis) == [1], text
    assert "rank 1 raised OSError: [Errno 5] Input/output error: '/mnt/data/shard-00017.tar'\n" in text
    assert "your code: /app/train.py:61 in main" in text


def test_a_blank_line_docker_kept_is_a_blank_line(tmp_path: Path) -> None:
    """Docker's json-file keeps a blank line the job (or a paste's double spacing) wrote as an entry of no text: a
    blank line, not the entry's JSON among the job's lines (which broke torchrun's table into pieces)."""
    table = ["Failures:"]
    for rank in (1, 2):
        pid = f"{5060 + rank}"
        table += [f"[{rank}]:", "  time      : 2023-09-15_08:38:11", f"  rank      : {rank} (local_rank: {rank})"]
        table += [f"  exitcode  : -7 (pid: {pid})", f"  traceback : Signal 7 (SIGBUS) received by PID {pid}"]
    table += ["Root Cause (first observed failure):", "[0]:", "  time      : 2023-09-15_08:38:11"]
    table += ["  rank      : 0 (local_rank: 0)", "  exitcode  : -7 (pid: 5060)"]
    table += ["  traceback : Signal 7 (SIGBUS) received by PID 5060"]
    entries = [
        json.dumps({"log": text + "\n", "stream": "stderr", "time": "2023-09-15T08:38:11Z"})
        for line in table
        for text in (line, "")
    ]
    (tmp_path / "container-json.log").write_text("\n".join(entries) + "\n")
    assert "ranks 0-2 failed alike" in render_analysis(analyze([str(tmp_path / "container-json.log")]))
