"""``distmon analyze`` on NCCL-shaped dumps and logs built from the formats: Megatron's groups,
pipeline sends, mixed versions and forms, empty, missing and hostile files, both watchdog
formats; the same verdict as a Monitor fed the same reports."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import tarfile
import time
from pathlib import Path

import pytest

from distmon.cli import main
from distmon.forensics.analysis import POST_MORTEM, analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.inputs import _Lines, _text
from distmon.forensics.render import analysis_json, culprits, render_analysis
from distmon.guards.files import open_regular
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.wire import Report, encode
from tests.support.commands import distmon
from tests.support.nccl_dumps import VERSIONS, Group, RankRecorder, megatron, member_group

STUCK = 5


def pipeline_hang(stuck: int = STUCK, steps: int = 3) -> list[RankRecorder]:
    """TP2 x PP2 x DP2 (21 groups a rank): stage 0 (ranks 0-3) runs its tensor-parallel
    all-reduce and sends to stage 1, which receives, all-reduces, and every rank then
    all-reduces over data parallel. In the last step rank ``stuck`` (stage 1) stays in its
    own code: its stage-0 peer's send and its tensor-parallel peer's all-reduce never
    complete, and on NCCL's in-order streams neither does what those ranks enqueued after."""
    recorders, groups = megatron(2, 2, 2)
    for step in range(1, steps + 2):
        last = step == steps + 1
        blocked: set[int] = set()
        for r in sorted(recorders, key=lambda r: r.rank):
            me = r.rank
            tp, pp, dp = (member_group(groups, d, me).name for d in ("TENSOR", "PIPELINE", "DATA"))
            if last and me == stuck:
                continue
            peer = next(x for x in groups[pp].ranks if x != me)
            if me < 4:
                r.collective(tp, "all_reduce")
                if last and peer == stuck:
                    blocked.add(me)
                r.send(pp, peer, done=me not in blocked)
            else:
                r.recv(pp, peer)
                if last and stuck in groups[tp].ranks:
                    blocked.add(me)
                r.collective(tp, "all_reduce", done=me not in blocked)
        for r in recorders:
            if last and r.rank == stuck:
                continue
            dp = member_group(groups, "DATA", r.rank)
            stopped = last and any(m in blocked or m == stuck for m in dp.ranks)
            r.collective(dp.name, "all_reduce", done=not stopped)
    return recorders


def write(recorders: list[RankRecorder], folder: Path, form: str = "pickle") -> None:
    folder.mkdir(exist_ok=True)
    for r in recorders:
        data = {"pickle": r.pickle, "json": r.json, "torch 2.3": r.torch_2_3}[form]()
        (folder / f"nccl_trace_rank_{r.rank}").write_bytes(data)


def test_a_pipeline_hang_names_the_stuck_stage_rank_alone(tmp_path: Path) -> None:
    write(pipeline_hang(), tmp_path)
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [STUCK]
    assert analysis.world == 8 and analysis.world_from == "the dumps" and analysis.missing == {}
    assert all(len(r.groups) >= 3 for r in analysis.ranks.values())
    text = render_analysis(analysis)
    assert f"CULPRIT rank {STUCK}: rank {STUCK} holds up the job" in text
    assert "rank 1 in send #4 to rank 5 in group" in text
    assert "(TENSOR_MODEL_PARALLEL_GROUP, ranks 4-5)" in text
    assert f"rank {STUCK}: CULPRIT, its host stopped enqueuing while its peers went on; nothing in flight" in text


def test_torch_2_3s_dumps_name_the_same_rank(tmp_path: Path) -> None:
    """Its one count of collectives and sends differs from stage to stage, yet members of a
    group count alike: the stuck rank is named alone, as from the newer dumps."""
    write(pipeline_hang(), tmp_path, "torch 2.3")
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [STUCK]
    assert f"CULPRIT rank {STUCK}: rank {STUCK} holds up the job" in render_analysis(analysis)


def test_torch_2_2s_dumps_name_the_rank_the_default_group_waits_for_since_the_files_were_written(
    tmp_path: Path,
) -> None:
    """Bare lists of entries stating no timeout: ranks 0, 1, 3 wait in all-reduce #4 of the default group, rank 2
    never enqueued it. The files, written 10 minutes after, say when the dumps were taken: how long they waited
    (within torch's longest default timeout after the latest entry; a copy's time, a day later, is not)."""
    world = Group("0", "default_pg", [0, 1, 2, 3])
    recorders = [RankRecorder(rank) for rank in range(4)]
    for r in recorders:
        r.join(world)
        for _ in range(3):
            r.collective("0", "all_reduce")
        if r.rank != 2:
            r.collective("0", "all_reduce", done=False)
    for r in recorders:
        (tmp_path / f"nccl_trace_rank_{r.rank}").write_bytes(r.torch_2_2())
    latest = max(e["time_created_ns"] for r in recorders for e in r.entries) / 1e9

    def judged(written: float) -> str:
        for r in recorders:
            os.utime(tmp_path / f"nccl_trace_rank_{r.rank}", (written, written))
        analysis = analyze([str(tmp_path)])
        assert culprits(analysis) == [2]
        return render_analysis(analysis)

    assert "ranks 0-1, 3 wait in #4 (all_reduce, 1024) for 10m00s" in judged(latest + 600)
    assert "for 10m00s" not in judged(latest + 86400), "a copy's time is not the dump's"


def test_the_verdict_is_a_monitors_on_the_same_reports(tmp_path: Path) -> None:
    """The reports analyze builds, fed to a Monitor by hand, raise the very same alerts."""
    write(pipeline_hang(), tmp_path)
    analysis = analyze([str(tmp_path)])
    monitor = Monitor(Detector(limits=POST_MORTEM), job="analyzed")
    for rank in sorted(analysis.ranks):
        state = analysis.monitor.state.ranks[rank]
        report: Report = state.report
        monitor.ingest(encode(report), analysis.t)
    monitor.tick(analysis.t)
    mine = [(a.kind, a.ranks, a.summary) for a in monitor.alerts.history]
    assert mine == [(a.kind, a.ranks, a.summary) for a in analysis.alerts]


@pytest.mark.parametrize("form", ["pickle", "json"])
def test_versions_and_forms_mixed_across_ranks_read_alike(tmp_path: Path, form: str) -> None:
    recorders = pipeline_hang()
    for r in recorders:
        r.version = VERSIONS[r.rank % len(VERSIONS)]
    write(recorders, tmp_path, form)
    (tmp_path / "nccl_trace_rank_0").write_bytes(recorders[0].json() if form == "pickle" else recorders[0].pickle())
    assert culprits(analyze([str(tmp_path)])) == [STUCK]


def test_a_missing_and_an_empty_dump_are_evidence(tmp_path: Path) -> None:
    recorders = pipeline_hang()
    recorders[STUCK].entries.clear()
    for status in recorders[STUCK].status.values():  # a rank that hung before any work
        status[:] = [0, -1, 0]
    write([r for r in recorders if r.rank != 7], tmp_path)
    analysis = analyze([str(tmp_path)])
    assert analysis.missing == {7: "no file", STUCK: "empty dump"}
    assert culprits(analysis) == [STUCK]
    found = analysis_json(analysis)
    assert found["missing"] == [{"rank": STUCK, "reason": "empty dump"}, {"rank": 7, "reason": "no file"}]
    assert "No evidence from: rank 5 (empty dump); rank 7 (no file)" in render_analysis(analysis)


class CallsAFunction:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch owned",))


def test_hostile_and_broken_files_get_a_line_each_and_the_rest_is_analysed(tmp_path: Path) -> None:
    recorders = pipeline_hang()
    write(recorders, tmp_path)
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"version": "2.10", "x": CallsAFunction()}))
    (tmp_path / "nccl_trace_rank_2").write_bytes(recorders[2].pickle()[:100])
    (tmp_path / "nccl_trace_rank_9").write_bytes(b"\x80\x02" + b"\xff" * 64)
    (tmp_path / "binary.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "dump_without_a_rank").write_bytes(recorders[1].pickle())
    os.chdir(tmp_path)
    analysis = analyze([str(tmp_path), str(tmp_path / "nope")])
    assert not (tmp_path / "owned").exists()
    lines = analysis.problems
    assert len(lines) == 6 and all("\n" not in line for line in lines)
    assert any("nccl_trace_rank_0: holds a Python object (posix.system)" in line for line in lines)
    assert any("nccl_trace_rank_2: unreadable" in line for line in lines)
    assert any("binary.bin: neither a Flight Recorder dump nor a log" in line for line in lines)
    assert any("dump_without_a_rank: a dump, but its name does not end" in line for line in lines)
    assert any("nope: no such file or folder" in line for line in lines)
    assert analysis.missing == {0: "its dump could not be read", 2: "its dump could not be read"}
    assert culprits(analysis) == [STUCK]


def test_a_huge_dump_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distmon.forensics import parallel as module

    monkeypatch.setattr(module, "MAX_DUMP_FILE_BYTES", 100)
    write(pipeline_hang()[:1], tmp_path)
    found = analyze([str(tmp_path)])
    assert found.problems == [f"{tmp_path}/nccl_trace_rank_0: 0 MiB, over the 0 MiB a dump may have"]


NEW_LOG = """\
[rank0]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[rank0]:[E1124 03:12:44.123556789 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
[rank1]:[E1124 03:12:44.200000000 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600050 milliseconds before timing out.
[rank3]:[E1124 03:12:45.001234567 ProcessGroupNCCL.cpp:2084] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence id: 1580 PG status: last enqueued work: 1580, last completed work: 1579
[rank2]: some output of rank 2, which printed no watchdog line
"""  # noqa: E501
OLD_LOG = """\
[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
"""  # noqa: E501


def test_a_log_suspects_the_rank_that_printed_no_watchdog_line(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text(NEW_LOG)
    analysis = analyze([str(tmp_path / "job.log")], world=4)
    assert culprits(analysis) == [] and [s.rank for s in assign_blame(analysis).suspects] == [2]
    assert analysis.world_from == "--world"
    assert analysis.missing == {2: "no watchdog line in the log"}
    text = render_analysis(analysis)
    assert "ranks 0-1: waits in collective #1580 (all_reduce) of group 0 (default_pg, ranks 0-3) for 10m00s" in text


def test_the_old_format_and_a_world_the_log_cannot_tell(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text(OLD_LOG)
    analysis = analyze([str(tmp_path)], world=3)
    assert culprits(analysis) == [] and [s.rank for s in assign_blame(analysis).suspects] == [2]
    assert analysis.missing == {2: "no line in the log"}
    assert "(_all_gather_base)" in render_analysis(analysis)
    alone = analyze([str(tmp_path)])
    assert alone.world == 2 and alone.world_from == "the highest rank seen"


def test_torchruns_rendezvous_gives_the_world(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text("  global_world_sizes=[4, 4, 4, 4]\n" + NEW_LOG)
    analysis = analyze([str(tmp_path)])
    assert analysis.world == 4 and analysis.world_from == "the log"


def test_the_command_prints_json_with_the_contract_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(pipeline_hang(), tmp_path)
    assert main(["analyze", str(tmp_path), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {"culprits", "summary", "ranks", "missing"} <= found.keys()
    assert found["culprits"] == [STUCK] and found["summary"].startswith(f"rank {STUCK} holds up the job")
    rank1 = next(r for r in found["ranks"] if r["rank"] == 1)
    assert {"groups", "last_started", "last_completed", "oldest_pending"} <= rank1.keys()
    assert rank1["oldest_pending"]["op"] == "send 0->1"
    assert rank1["oldest_pending"]["p2p"] is True


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--world", "zero"], "not a number of ranks: 'zero'"),
        (["--world", "0"], "a world of 1 to"),
        ([], "no Flight Recorder dump nor job log found"),
    ],
)
def test_mistakes_get_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    done = distmon("analyze", str(tmp_path), *args)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


WATCHDOG = (
    "[rank1]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation"
    " timeout: WorkNCCL(SeqNum=15, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060"
    " milliseconds before timing out.\n"
)


def piped(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_a_log_piped_in_is_read_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kubectl logs POD | distmon analyze -``; a problem with it names stdin, not a copy."""
    piped(monkeypatch, WATCHDOG.encode())
    assert main(["analyze", "-"]) == 0
    assert "rank 1 waits in collective #15 (all_reduce)" in capsys.readouterr().out
    piped(monkeypatch, gzip.compress(WATCHDOG.encode()))
    assert main(["analyze", "-"]) == 2
    assert "distmon analyze: stdin: gzip-compressed: unpack it first" in capsys.readouterr().err


def test_an_empty_file_named_is_said_and_json_still_gets_an_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found in a folder, an empty file (a rank's empty stderr) is no problem; named, it is."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "stderr").write_text("")
    (tmp_path / "job.log").write_text("")
    assert main(["analyze", "--json", str(tmp_path / "job.log"), str(tmp_path / "run")]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["culprits"] == [] and json.loads(out)["problems"] == [f"{tmp_path}/job.log: empty (0 bytes)"]
    assert f"{tmp_path}/job.log: empty (0 bytes)" in err and "stderr" not in err


def test_a_file_is_read_once_and_a_folders_hidden_files_not_at_all(tmp_path: Path) -> None:
    """A link to a dump, a folder named twice, a notebook's checkpoint copy, macOS's ``._``
    file: none is a second dump of a rank, nor a problem."""
    write(pipeline_hang(), tmp_path / "dumps")
    os.symlink(tmp_path / "dumps" / "nccl_trace_rank_3", tmp_path / "dumps" / "latest_rank_3")
    (tmp_path / "dumps" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "dumps" / ".ipynb_checkpoints" / "nccl_trace_rank_1").write_bytes(pipeline_hang()[0].pickle())
    (tmp_path / "dumps" / "._nccl_trace_rank_2").write_bytes(b"\x00\x05\x16\x07" + bytes(200))
    analysis = analyze([str(tmp_path / "dumps"), str(tmp_path / "dumps"), str(tmp_path / "dumps" / "latest_rank_3")])
    assert culprits(analysis) == [STUCK] and analysis.problems == []


def test_of_two_runs_dumps_in_one_folder_the_latest_is_judged(tmp_path: Path) -> None:
    """The job ran again an hour later, its dumps beside the first run's: a rank's later dump is
    judged, whatever the paths' order, and each earlier one is said left out."""
    first, again = pipeline_hang(stuck=5), pipeline_hang(stuck=6)
    for r in again:
        for e in r.entries:
            e["time_created_ns"] += 3600 * 10**9
    write(first, tmp_path / "a")
    write(again, tmp_path / "b")
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [6]
    assert len(analysis.problems) == 8 and all("not the latest" in p and "/a/" in p for p in analysis.problems)


def test_ranks_and_worlds_beyond_what_distmon_judges_get_a_line(tmp_path: Path) -> None:
    write(pipeline_hang(), tmp_path)
    (tmp_path / "nccl_trace_rank_999999999").write_bytes(pipeline_hang()[0].pickle())
    (tmp_path / "job.log").write_text("global_world_sizes=[999999999]\n[rank888888888]: hello\n")
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [STUCK]
    assert any("rank 999999999, beyond the" in p for p in analysis.problems)
    assert any("rank 888888888 is beyond the" in p for p in analysis.problems)


def test_a_group_no_entry_names_is_listed_not_guessed(tmp_path: Path) -> None:
    recorders = pipeline_hang()
    for r in recorders:
        r.version = "2.7"
    recorders[0].status["unused"] = [3, -1, 2]
    recorders[0].pg_ids["unused"] = 99
    write(recorders, tmp_path)
    rank0 = analysis_json(analyze([str(tmp_path)]))["ranks"][0]
    assert rank0["unnamed_groups"] == ["99"] and rank0["version"] == "2.7"


def test_dumps_from_different_moments_are_judged_at_the_latest(tmp_path: Path) -> None:
    """Stage 0's work was enqueued two minutes after stage 1's: the ranks are judged when the
    first watchdog fired, a timeout after the oldest work pending."""
    recorders = pipeline_hang()
    for r in recorders[:4]:
        for e in r.entries:
            e["time_created_ns"] += 120 * 10**9
    write(recorders, tmp_path)
    analysis = analyze([str(tmp_path)])
    assert culprits(analysis) == [STUCK]
    # the files' times are today's, not the dumps': the first watchdog to fire took them
    pending = [e for r in recorders for e in r.entries if not e["retired"]]
    fired = min(e["time_created_ns"] / 1e9 + e["timeout_ms"] / 1000 for e in pending)
    assert analysis.t == pytest.approx(fired, abs=1e-5)


def test_packed_logs_are_told_how_to_unpack_and_windows_and_rotated_text_is_read(tmp_path: Path) -> None:
    """A rotated log's ``.gz`` (and the other packers) gets a line saying how to unpack it; a UTF-16 copy with its
    byte-order mark, and a log behind a hole of NULs logrotate's copytruncate left, are read as the text they are."""
    text = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/job/train.py", line 80, in step\n'
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.\n"
    )
    (tmp_path / "job.log.gz").write_bytes(gzip.compress(text.encode()))
    packed = analyze([str(tmp_path / "job.log.gz")])
    assert packed.problems == [
        f"{tmp_path / 'job.log.gz'}: gzip-compressed: unpack it first (gunzip -k), then analyze what it holds"
    ]
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "job.log").write_text(text)
    for name, mode in (("logs.tar", "w"), ("logs.tgz", "w:gz")):  # a folder tarred to be sent
        with tarfile.open(tmp_path / name, mode) as tar:
            tar.add(folder, "logs")
    assert analyze([str(tmp_path / "logs.tar"), str(tmp_path / "logs.tgz")]).problems == [
        f"{tmp_path / 'logs.tar'}: a tar archive: unpack it first (tar xf), then analyze the folder it holds",
        f"{tmp_path / 'logs.tgz'}: gzip-compressed: unpack it first (tar xf), then analyze what it holds",
    ]
    for name, data in (("windows.log", text.encode("utf-16")), ("rotated.log", b"\0" * 8192 + text.encode())):
        (tmp_path / name).write_bytes(data)
        assert list(analyze([str(tmp_path / name)]).log.raised) == [1], name


def test_a_dumps_rank_is_the_number_after_rank_in_its_name_not_a_date_after_it(tmp_path: Path) -> None:
    """``fr_dump_rank_3_2025-09-23.pkl``: rank 3, not 23 for every file."""
    recorders = pipeline_hang()
    for r in recorders:
        (tmp_path / f"fr_dump_rank_{r.rank}_2025-09-23.pkl").write_bytes(r.pickle())
    analysis = analyze([str(tmp_path)])
    assert sorted(analysis.ranks) == [r.rank for r in recorders] and culprits(analysis) == [STUCK]


def test_a_log_still_being_written_is_read_as_it_stood_when_opened(tmp_path: Path) -> None:
    """Lines appended after the file was opened are not chased: a writer faster than the reader would keep it
    reading to no end."""
    log = tmp_path / "growing.log"
    log.write_text("a line as it stood\n" * 1000)
    with open_regular(str(log)) as raw, _text(raw) as text:
        lines = _Lines(text, time.monotonic() + 60)
        with log.open("a") as more:
            more.write("a line written later\n" * 200_000)
        read = sum(1 for _ in lines)
    assert 1000 <= read < 20_000
