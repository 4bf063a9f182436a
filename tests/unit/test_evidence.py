"""The post-mortem's rules on dumps in NCCL's shape, each fault as its signature reads in the
dumps torch writes on a timeout (active work only): a device that stopped completing, a host
that stopped enqueuing (its ring empty), a collective that does not complete with one member
behind elsewhere, a message posted on both ends. Named: the culprits, never a rank that waits."""

from __future__ import annotations

from pathlib import Path

from distmon.forensics.analysis import analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.evidence import CODE, HARDWARE, evidence
from distmon.forensics.render import culprits, render_analysis
from tests.support.nccl_dumps import Group, RankRecorder

WORLD = Group("0", "default_pg", [0, 1, 2, 3])
TP_A = Group("1", "TENSOR_MODEL_PARALLEL_GROUP", [0, 1])
TP_B = Group("2", "TENSOR_MODEL_PARALLEL_GROUP", [2, 3])
EP = Group("3", "EXPERT_MODEL_PARALLEL_GROUP", [0, 1, 2, 3])
PP = Group("4", "PIPELINE_MODEL_PARALLEL_GROUP", [0, 2])


def job() -> list[RankRecorder]:
    """Four ranks, each in the world, its tensor-parallel pair and the expert group; ten
    healthy steps of a tensor-parallel all-gather and an expert all-to-all."""
    recorders = [RankRecorder(rank) for rank in range(4)]
    for r in recorders:
        for g in (WORLD, TP_A if r.rank < 2 else TP_B, EP):
            r.join(g)
        for _ in range(10):
            r.collective(tp_of(r.rank).name, "_all_gather_base")
            r.collective(EP.name, "all_to_all")
    return recorders


def tp_of(rank: int) -> Group:
    return TP_A if rank < 2 else TP_B


def waited(rank: int, seq: int, stamp: str = "1203 10:00:00.000000") -> str:
    """Rank ``rank``'s watchdog line: it timed out in all-reduce #``seq``."""
    return (
        f"[rank{rank}]:[E{stamp} 1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
    )


def active_only(recorders: list[RankRecorder], folder: Path) -> list[str]:
    """The dumps as torch writes them when its watchdog fires: the work still in flight."""
    folder.mkdir(exist_ok=True)
    for r in recorders:
        r.entries = [e for e in r.entries if not e["retired"]]
        (folder / f"nccl_trace_rank_{r.rank}").write_bytes(r.pickle())
    return [str(folder)]


def test_a_device_that_stopped_completing_is_named_and_points_at_the_hardware(tmp_path: Path) -> None:
    """Rank 1's host enqueued three more all-gathers its peer completed; its device finished
    none, and its host stopped short of the next all-to-all, which the others wait in."""
    recorders = job()
    for r in recorders:
        if r.rank == 1:
            for _ in range(3):
                r.collective(TP_A.name, "_all_gather_base", done=False)
        else:
            if r.rank == 0:
                for _ in range(3):
                    r.collective(TP_A.name, "_all_gather_base")
                r.collective(TP_A.name, "_all_gather_base", done=False)
            r.collective(EP.name, "all_to_all", done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [1]
    (found,) = evidence(analysis, [1])
    assert found.points_at == HARDWARE and "device stopped completing" in found.why
    assert (
        "collective #11 (_all_gather_base, 1024 BFloat16)" in found.facts[0] and "rank 0 completed it" in found.facts[0]
    )
    assert "nvidia-smi -q" in found.next_step
    assert all(0 not in a.ranks and 2 not in a.ranks and 3 not in a.ranks for a in analysis.alerts)


def test_a_host_that_stopped_enqueuing_is_named_from_its_status_alone(tmp_path: Path) -> None:
    """Rank 3 stays in its own code (the GIL held): nothing of its own is in flight, so its
    dump holds no entry and its groups are named by the order it created them."""
    recorders = job()
    for r in recorders:
        if r.rank != 3:
            r.collective(tp_of(r.rank).name, "_all_gather_base", done=r.rank < 2)
            r.collective(EP.name, "all_to_all", done=False)
    paths = active_only(recorders, tmp_path)
    assert recorders[3].entries == []
    analysis = analyze(paths)
    assert culprits(analysis) == [3] and analysis.missing == {}
    (found,) = evidence(analysis, [3])
    assert found.points_at == CODE and "host stopped enqueuing" in found.why
    assert "is #10; rank 2 enqueued up to #11; rank 2 waits in #11" in found.facts[0]
    assert "rank 3: CULPRIT, its host stopped enqueuing while its peers went on; nothing in flight" in render_analysis(
        analysis
    )


def test_a_collective_every_member_issued_names_the_member_behind_elsewhere(tmp_path: Path) -> None:
    """Both ranks of one pair issued all-gather #11 and it does not complete; rank 1 also
    never issued the all-to-all every other rank waits in: rank 1, not its pair, is named."""
    recorders = job()
    for r in recorders:
        if r.rank < 2:
            r.collective(TP_A.name, "_all_gather_base", done=False)
        if r.rank != 1:
            r.collective(EP.name, "all_to_all", done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [1]
    assert {r for a in analysis.alerts for r in a.ranks} == {1}


def test_a_send_posted_on_both_ends_waits_for_the_end_held_up_elsewhere(tmp_path: Path) -> None:
    """Rank 0 sends to rank 2, which posted the receive but is held up in an older all-to-all
    that waits for rank 1: the message leads to rank 2, and on to rank 1."""
    recorders = job()
    for r in recorders:
        if r.rank in (0, 2):
            r.join(PP)
    for r in recorders:
        if r.rank == 2:
            r.collective(EP.name, "all_to_all", done=False)
            r.recv(PP.name, 0, done=False)
        if r.rank == 3:
            r.collective(EP.name, "all_to_all", done=False)
        if r.rank == 0:
            r.send(PP.name, 2, done=False)
            r.collective(EP.name, "all_to_all", done=False)  # queued behind the send
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [1]
    assert {r for a in analysis.alerts for r in a.ranks} == {1}


def test_a_send_both_ends_are_held_up_in_does_not_arrive(tmp_path: Path) -> None:
    """Both ends posted it and wait in nothing older: the link, and both ends, are named."""
    recorders = job()
    for r in recorders:
        if r.rank in (0, 2):
            r.join(PP)
    recorders[0].send(PP.name, 2, done=False)
    recorders[2].recv(PP.name, 0, done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [0, 2]
    assert "does not arrive" in render_analysis(analysis)


def test_a_receive_its_sender_completed_is_the_receivers_device(tmp_path: Path) -> None:
    """In a pair both ends number their sends and receives alike: rank 0 completed send #1,
    rank 2's device never completed the receive, and its host never reached the all-to-all."""
    recorders = job()
    for r in recorders:
        if r.rank in (0, 2):
            r.join(PP)
    recorders[0].send(PP.name, 2)
    recorders[2].recv(PP.name, 0, done=False)
    for r in recorders:
        if r.rank != 2:
            r.collective(EP.name, "all_to_all", done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [2]
    (found,) = evidence(analysis, [2])
    assert found.points_at == HARDWARE and "point-to-point op #1 (recv 1<-0" in found.facts[0]


def test_a_rank_that_raised_beside_waiting_peers_is_shown_where_it_raised_not_as_hanging(tmp_path: Path) -> None:
    """Its traceback cut before its exception line: it raised in its own code (no stack to take
    of a process that is gone), and its peers' timeouts follow from it."""
    raised = "".join(
        f"[rank2]: {line}\n"
        for line in ("Traceback (most recent call last):", '  File "/job/train.py", line 70, in main', "    next(it)")
    )
    (tmp_path / "job.log").write_text(raised + "".join(waited(r, 120) for r in (0, 1, 3)))
    analysis = analyze([str(tmp_path)])
    [said] = evidence(analysis, [2])
    assert said.points_at == CODE and said.why == "it raised (its exception line is not in the log)"
    assert said.facts[0] == "your code: /job/train.py:70 in main" and "py-spy" not in said.next_step
    assert "rank 2: CULPRIT, it raised (its exception line is not in the log)\n" in render_analysis(analysis) + "\n"


def test_the_hang_a_raised_culprit_left_behind_says_only_who_waits(tmp_path: Path) -> None:
    """The culprit's evidence says where it raised: the hang it left, said after, adds who waits for
    it, not a stack to take of a process that is gone."""
    raised = "".join(
        f"[rank3]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/job/train.py", line 61, in main',
            "    batch = next(it)",
            "RuntimeError: bad sample 123",
        )
    )
    (tmp_path / "job.log").write_text(raised + "".join(waited(r, 51) for r in (0, 1, 2)))
    shown = render_analysis(analyze([str(tmp_path)]))
    assert "CULPRIT rank 3" in shown and "Also: hang: rank 3 holds up the job" in shown
    assert "ranks 0-2 in collective #51" in shown and "py-spy" not in shown and "pid 0" not in shown


def test_a_rank_a_launcher_says_was_killed_is_not_shown_as_hanging(tmp_path: Path) -> None:
    """torchrun's table: rank 6 (its first observed failure) and ranks 4-5, 7 of the same host killed in the same
    second while ranks 0-3 wait for them: the host's memory, not a stack to take of a process that is gone; where
    the kernel's log says its OOM killer killed a rank's pid, that rank's memory, said so."""

    def failure(n: int, rank: int) -> str:
        return (
            f"[{n}]:\n  time      : 2024-05-01_12:00:40\n  host      : node1\n  rank      : {rank} (local_rank: "
            f"{rank - 4})\n  exitcode  : -9 (pid: {3220 + rank})\n  error_file: <N/A>\n  traceback : Signal 9 "
            f"(SIGKILL) received by PID {3220 + rank}\n"
        )

    table = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        + "=" * 60
        + "\ntrain.py FAILED\n"
        + "-" * 60
        + "\nFailures:\n"
        + failure(1, 4)
        + failure(2, 5)
        + failure(3, 7)
        + "-" * 60
        + "\nRoot Cause (first observed failure):\n"
        + failure(0, 6)
        + "=" * 60
        + "\n"
    )
    (tmp_path / "job.log").write_text("".join(waited(r, 4521, "501 12:10:40.000000") for r in range(4)) + table)
    analysis = analyze([str(tmp_path)])
    [said] = evidence(analysis, [6])
    assert said.why.startswith("it was killed (SIGKILL)") and "py-spy" not in said.next_step
    assert said.facts == [
        "torchrun says it ended by signal 9 (SIGKILL) on node1",
        "ranks 4-5, 7 on node1 were killed in the same second: the host's memory, or the host",
    ]
    assert "dmesg" in said.next_step
    kernel = "[ 812.3] Out of memory: Killed process {} (python) total-vm:98765432kB, anon-rss:61234567kB\n"
    table = (tmp_path / "job.log").read_text()
    for pid, killer in ((9999, False), (3226, True)):
        (tmp_path / "job.log").write_text(kernel.format(pid) + table)
        [said] = evidence(analyze([str(tmp_path)]), [6])
        assert (said.why == "the kernel's out-of-memory killer killed it") is killer, "where its pid is the kernel's"
        assert ("killed process 3226, this one" in said.facts[1] and "host memory ran out" in said.next_step) is killer


def test_a_device_behind_on_work_its_host_and_peers_went_past_is_named(tmp_path: Path) -> None:
    """Both ranks of a pair enqueued all-gathers #11 and #12; rank 0 completed #11, rank 1's device completed
    neither: #12, which every member issued, waits for rank 1's device, not for the transport."""
    recorders = job()
    for r in recorders[:2]:
        r.collective(TP_A.name, "_all_gather_base", done=r.rank == 0)
        r.collective(TP_A.name, "_all_gather_base", done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    assert culprits(analysis) == [1]
    (found,) = evidence(analysis, [1])
    assert found.points_at == HARDWARE and "rank 0 completed it" in found.facts[0]


def test_collectives_waiting_behind_a_pairs_older_stuck_one_are_one_incident(tmp_path: Path) -> None:
    """Ranks 2-3 issued all-gather #11 and it does not complete; they issued the all-to-all after it, which
    ranks 0-1 wait in: it waits for their older work, so one incident (the pair's), not an all-to-all with
    "none behind" beside it."""
    recorders = job()
    for r in recorders:
        if r.rank >= 2:
            r.collective(TP_B.name, "_all_gather_base", done=False)
        r.collective(EP.name, "all_to_all", done=False)
    analysis = analyze(active_only(recorders, tmp_path))
    verdict = assign_blame(analysis)
    assert verdict.nobody is not None and "collective #11 (_all_gather_base)" in verdict.nobody
    assert "the transport" in verdict.nobody and "watchdog" not in verdict.nobody
    assert len(analysis.alerts) == 1


def test_a_rank_that_issued_a_collective_of_another_size_is_named_from_the_dumps(tmp_path: Path) -> None:
    recorders = job()
    for r in recorders:
        entry = r.collective(WORLD.name, "all_reduce", done=False)
        entry["input_sizes"] = [[2048 if r.rank == 2 else 1024]]
    analysis = analyze(active_only(recorders, tmp_path))
    verdict = assign_blame(analysis)
    assert verdict.culprits == [2] and "2048 elements where ranks 0-1, 3 issued all_reduce of 1024" in verdict.headline


def host_stopped_at_3(tmp_path: Path) -> list[RankRecorder]:
    """Rank 3 stays in its own code: its peers wait in the all-to-all it never issued."""
    recorders = job()
    for r in recorders:
        if r.rank != 3:
            r.collective(tp_of(r.rank).name, "_all_gather_base", done=r.rank < 2)
            r.collective(EP.name, "all_to_all", done=False)
    active_only(recorders, tmp_path)
    return recorders


def test_a_dump_missing_or_unreadable_beside_a_culprit_its_own_dump_shows_is_no_culprit(tmp_path: Path) -> None:
    """Rank 3's dump shows it stopped; rank 2's file is cut short (it was alive to write it), or absent (what it
    did, no file says): rank 3 is proven, rank 2 at most suspected."""
    host_stopped_at_3(tmp_path)
    dump = tmp_path / "nccl_trace_rank_2"
    dump.write_bytes(dump.read_bytes()[:40])
    assert culprits(analyze([str(tmp_path)])) == [3]
    dump.unlink()
    assert culprits(analyze([str(tmp_path)])) == [3]


def test_a_corrupt_enqueue_time_says_no_wait_of_centuries(tmp_path: Path) -> None:
    recorders = host_stopped_at_3(tmp_path)
    recorders[0].entries[-1]["time_created_ns"] = 1000  # 1970
    (tmp_path / "nccl_trace_rank_0").write_bytes(recorders[0].pickle())
    shown = render_analysis(analyze([str(tmp_path)]))
    assert "CULPRIT rank 3" in shown and "for up to 10m00s" in shown


def test_a_device_side_assert_is_the_programs_check_and_an_out_of_memory_its_gpus_not_the_line_it_raised_at(
    tmp_path: Path,
) -> None:
    waits = "".join(waited(r, 120) for r in (0, 2, 3))
    for said, words in (
        ("RuntimeError: CUDA error: device-side assert triggered", "a label or an index out of range"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "another process on that GPU"),
    ):
        raised = (
            "[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "/job/train.py", line 70, in main\n'
            "[rank1]:     loss.backward()\n"
            f"[rank1]: {said}\n"
        )
        (tmp_path / "job.log").write_text(raised + waits)
        [found] = evidence(analyze([str(tmp_path)]), [1])
        assert found.points_at == CODE and words in found.next_step and "drain" not in found.next_step, said


def test_torchs_trailer_under_every_cuda_error_is_no_device_side_assert(tmp_path: Path) -> None:
    """Since torch 2.0 every CUDA error ends ``Compile with `TORCH_USE_CUDA_DSA` to enable device-side
    assertions.``: an ECC error with it is still the GPU's, to drain; an assert with it still the program's."""
    trailer = (
        "[rank1]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
        "below might be incorrect.\n[rank1]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "[rank1]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    for error, points_at, words in (
        ("uncorrectable ECC error encountered", HARDWARE, "drain its node"),
        ("device-side assert triggered", CODE, "a label or an index out of range"),
    ):
        raised = (
            "[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "/job/train.py", line 70, in main\n'
            "[rank1]:     loss.backward()\n"
            f"[rank1]: RuntimeError: CUDA error: {error}\n"
        )
        (tmp_path / "job.log").write_text(raised + trailer + "".join(waited(r, 120) for r in (0, 2, 3)))
        [found] = evidence(analyze([str(tmp_path)]), [1])
        assert found.points_at == points_at and words in found.next_step, error


def test_a_rank_a_report_names_that_a_launcher_says_was_killed_is_not_told_to_take_its_stack(tmp_path: Path) -> None:
    """Horovod's stall inspector names rank 3; mpirun then says it died of SIGKILL: the next step is who killed
    it, not a stack of a process that is gone."""
    (tmp_path / "job.log").write_text(
        "[1,0]<stderr>:[2024-06-11 03:02:14.118233: W /tmp/horovod/common/stall_inspector.cc:107] One or more "
        "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
        "remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
        "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n"
        "[1,0]<stderr>:Missing ranks:\n[1,0]<stderr>:3: [allreduce.layer3.0.conv1.weight]\n"
        "mpirun noticed that process rank 3 with PID 0 on node gpu-node4 exited on signal 9 (Killed).\n"
    )
    [said] = evidence(analyze([str(tmp_path)]), [3], {3: "missing from every stalled tensor"})
    assert said.facts[0].startswith("it was killed (SIGKILL)") and "mpirun says it ended by signal 9" in said.facts[1]
    assert "py-spy" not in said.next_step and "find who killed it" in said.next_step


def test_one_dump_missing_proves_its_rank_several_missing_are_suspected_as_files_not_gathered(
    tmp_path: Path,
) -> None:
    """Four ranks wait in world all-reduce #11, all started: the one rank with no dump is proven (the culprit
    often writes none); two with none may be a node's files left on that node, so they are only suspected."""
    recorders = job()
    for r in recorders:
        r.collective(WORLD.name, "allreduce", done=False)
    for missing, proven in (([3], [3]), ([2, 3], [])):
        for f in tmp_path.iterdir():
            f.unlink()
        for r in recorders:
            if r.rank not in missing:
                (tmp_path / f"nccl_trace_rank_{r.rank}").write_bytes(r.pickle())
        verdict = assign_blame(analyze([str(tmp_path)]))
        assert verdict.culprits == proven, verdict.headline
        if not proven:
            assert [s.rank for s in verdict.suspects] == missing and "not gathered" in verdict.suspects[0].why


def test_several_dumps_missing_are_proven_unless_they_may_be_a_nodes(tmp_path: Path) -> None:
    """Sixteen ranks: fourteen wait in world all-reduce #3, enqueued by none of the two with no dump. Two
    ranks apart (a fault injected into two ranks, killed) are proven; a run of consecutive ranks, ranks a
    stride apart, or a quarter of the world may be a node whose files were left on it: suspected."""
    world = Group("0", "default_pg", list(range(16)))
    cases = (([10, 15], [10, 15]), ([3, 9], [3, 9]), ([6, 7], []), ([1, 5, 9], []), ([0, 3, 7, 12], []))
    for missing, proven in cases:
        for f in tmp_path.iterdir():
            f.unlink()
        for rank in set(range(16)) - set(missing):
            r = RankRecorder(rank)
            r.join(world)
            r.collective(world.name, "all_reduce")
            r.collective(world.name, "all_reduce")
            r.collective(world.name, "all_reduce", done=False)
            (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(r.pickle())
        verdict = assign_blame(analyze([str(tmp_path)]))
        assert verdict.culprits == proven, (missing, verdict.headline)
        assert [s.rank for s in verdict.suspects] == ([] if proven else missing), (missing, verdict.headline)


def test_a_rank_missing_from_dumps_where_a_log_tells_of_other_ranks_is_suspected_not_proven(tmp_path: Path) -> None:
    """Ranks 0-1's dumps and rank 2's watchdog line show them waiting in world all-reduce #1; rank 3 has neither:
    with a log, not a dump, telling of rank 2, the set is no set of every rank's dumps, so rank 3 is suspected."""
    recorders = job()
    for r in recorders:
        r.collective(WORLD.name, "all_reduce", done=False)
    for r in recorders[:2]:
        (tmp_path / f"nccl_trace_rank_{r.rank}").write_bytes(r.pickle())
    (tmp_path / "node1.log").write_text(waited(2, 1).replace("=8,", "=1024,"))
    verdict = assign_blame(analyze([str(tmp_path)]))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects][:1] == [3], verdict.headline
