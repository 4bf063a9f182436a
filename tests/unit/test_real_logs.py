"""``distmon analyze`` on logs users pasted into public GitHub issues (``tests/data/logs/real``,
each one's source, the thread's answer where it gives one, and what its lines prove in its
``NOTES.md``): every one is read, the ranks its lines prove are the culprits and no other, the
ranks its silence points to are suspects in order, and a log that blames nobody names nobody.

A paste is an excerpt: a rank it does not show is suspected, never proven."""

from __future__ import annotations

import json
import re

import pytest

from distmon.cli import main
from distmon.forensics.analysis import analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.render import render_analysis
from tests.support.paths import DATA

REAL = DATA / "logs" / "real"
NOBODY = "nobody"

VERDICTS = [
    # file, the culprits its lines prove, the first suspects in order (or NOBODY), words the summary holds
    ("accelerate_dpo_nccl_info_nranks.log", [], [0, 1], "for 4h43m"),
    ("ace_torch21_rank0_silent.log", [], [0], "ranks 1-3 wait in collective #1132079 (all_reduce)"),
    ("arctic_failure_detected_seq_id.log", [], [0, 2, 4, 6], "ranks 1, 3, 5, 7 wait in collective #120049"),
    ("automodel_consolidation_one_minute.log", [], [0, 1], "the collective timeout is 1m00s"),
    ("axolotl_illegal_memory_progress_bar.log", [7], [], "rank 7 raised CUDA error: an illegal memory access"),
    ("basicsr_three_ranks_808.log", [], NOBODY, "every rank issued it"),
    ("deim_heartbeat_every_rank.log", [], NOBODY, "every rank's watchdog got stuck"),
    ("diffsynth_coalesced_guid9.log", [], [0, 2], "of group 9"),
    ("diffusers_blocking_wait.log", [], [0, 2, 3, 4, 6], "ranks 1, 5, 7 wait in collective #2521"),
    ("discoscene_terminate_broadcast.log", [], [0, 1], "the usual root of the broadcast"),
    ("fsdp2_failure_detected_enqueued_ahead.log", [], [0, 1], "ranks 2-3 wait in collective #1085"),
    ("fsdp_ppo_generate_pg0_desc.log", [], [0, 3], "of group 0 (default_pg, ranks 0-3)"),
    ("fsdp_t5_op_mismatch_rank0.log", [0], [], "rank 0 in reduce, the others in _all_gather_base"),
    ("gcd_quoted_broadcast_rank0_silent.log", [], [0], "ranks 1-3 wait in collective #56693 (broadcast)"),
    ("glm130b_sentence.log", [], [0, 1], "rank 2 waits in collective #10 (broadcast)"),
    ("hf_peft_state_dict_rank0_alone.log", [], [0, 1, 2, 3], "suspected: rank 0 (alone in that collective"),
    ("litgpt_slurm_broadcast_first.log", [], [0], "ranks 1-2 wait in collective #1 (broadcast)"),
    ("llamafactory_heartbeat_rank144.log", [], [0, 1], "rank 144 waits with the watchdog stuck"),
    ("llamafactory_line_numbers_pg1.log", [], [1, 2], "ranks 0, 3-4 wait in collective #1580 (all_reduce) of group 1"),
    ("llamafactory_reduce_scatter_pg1.log", [], [1, 5, 7], "of group 1 (ranks 0-7)"),
    ("lmdeploy_illegal_memory_rank0.log", [0], [], "rank 0 raised CUDA error: an illegal memory access"),
    ("milabench_host_prefix_wrapped.log", [], [0, 1], "ranks 11-12, 14-15 wait in collective #2070 (reduce)"),
    ("nemo_progress_bar_stuck_hours.log", [], [1, 2, 3, 4, 5, 6], "for 7h07m"),
    ("ofa_torch112_two_absent.log", [], [0, 4, 5], "ranks 1-3, 6-7 wait in collective #469508"),
    ("openr1_grpo_broadcast_wrapped.log", [], [0, 4], "ranks 1-3, 5-6 wait in collective #4 (broadcast)"),
    ("pipelining_coalesced_first_work.log", [], [0], "rank 1 waits in collective #1 (coalesced)"),
    ("ray_worker_alltoall_pg5.log", [], [0, 1, 2], "rank 3 waits in collective #8 (all_to_all) of group 5"),
    ("sglang_what_pg3_allgather.log", [], [], "rank 5 of group 3: _all_gather_base #9141"),
    ("swift_multinode_oom_rank11.log", [11], [], "rank 11 raised torch.OutOfMemoryError"),
    ("torch21_terminate_broadcast_880.log", [], [0, 1], "rank 5 waits in collective #880 (broadcast)"),
    ("torchtune_save_checkpoint_what.log", [], [0, 1], "ranks 3, 7 wait in collective #28956 (all_reduce)"),
    ("trl_grpo_monitored_barrier_rank0.log", [0], [], "rank 0 never answered a peer's monitored barrier"),
    ("ultralytics_broadcast_first_wrapped.log", [], [0, 1], "ranks 3, 5, 7 wait in collective #1 (broadcast)"),
    ("verl_alltoall_epoch_guid9.log", [], [0, 1], "ranks 3, 7 wait in collective #4486 (all_to_all) of group 9"),
    ("vllm_ci_view_illegal_memory.log", [3], [], "rank 3 raised CUDA error: an illegal memory access"),
    ("vllm_ray_cuda_unknown_error_glued.log", [7], [], "rank 7 raised CUDA error: unknown error"),
    ("vllm_ray_gather_pg1.log", [], [0], "rank 1 waits in collective #158046 (gather) of group 1"),
    ("vllm_tp_first_allreduce.log", [], [0, 1, 2], "rank 3 waits in collective #1 (all_reduce)"),
    ("vlmr1_watchdog_stuck_wrapped.log", [], [0, 1], "rank 6 waits with the watchdog stuck"),
    ("torch27_desync_report_rank7.log", [7], [], "finished collective #182 and never started #183"),
    ("simpletuner_mismatch_names_rank7.log", [7], [], "rank 7 ran REDUCE #0 where 7 ranks ran ALLGATHER #101"),
    ("minigpt4_childfailed_two_alike.log", [], NOBODY, "ranks 0-1 failed alike at once (exit code 1)"),
    ("pla_childfailed_install_alike.log", [], NOBODY, "ranks 1-3 failed alike at once (exit code 1)"),
    ("egovlp_sigkill_local_rank3.log", [], [3], "local rank 3 ended by signal 9 (SIGKILL)"),
    ("robomamba_sigkill_local_rank5.log", [], [5], "local rank 5 ended by signal 9 (SIGKILL)"),
    ("horovod_mpirun_rank7_killed.log", [7], [], "rank 7 raised Signal 9 (Killed)"),
    ("horovod_mpirun_rank1_killed_xxx.log", [1], [], "rank 1 raised Signal 9 (Killed)"),
    ("horovod_libmpi_every_process_segfault.log", [], NOBODY, "6 processes failed alike at once"),
    ("horovod_stalled_broadcast_missing_rank0.log", [0], [], "rank 0 missing from every stalled tensor"),
    ("horovod_mpi_tags_missing_rank1.log", [1], [], "rank 1 missing from every stalled tensor"),
    ("horovod_ready_ranks_rank3_other_tensor.log", [3], [], "rank 3 missing from 3 of the 4 stalled tensors"),
    ("horovod_pytorch_ready_ranks_two_absent.log", [0, 6], [], "ranks 0, 6 missing from every stalled tensor"),
    ("nccl_warn_ib_completion_status12.log", [], NOBODY, "InfiniBand completion error 12 from peer 172.36.143.59"),
    ("nccl_warn_ib_completion_k8s_worker.log", [], NOBODY, "the network between the nodes"),
    ("horovod_duplicate_gpu_mpi_tags.log", [], NOBODY, "ranks 0 and 2 both on CUDA device 1000"),
    ("megatron_duplicate_gpu_interleaved.log", [], NOBODY, "ranks 0 and 3 both on CUDA device f000"),
    ("dfine_duplicate_gpu_default_device.log", [], NOBODY, "ranks 0 and 1 both on CUDA device 2000"),
    ("elastic_killed_agent_remote_peer_host.log", [], [0], "connection closed by ip-172-31-36-217"),
    ("nccl_remote_error_aws_broken_pipe.log", [], [], "a transport lost its peer"),
    ("accelerate_validation_dump_signal_rank0_observed.log", [], [0], "rank 1 waits in collective #22"),
    ("openrlhf_save_model_dump_signal_observed.log", [], [0, 1], "ranks 2, 6-7 wait in collective #460631"),
    ("accelerate_slurm_two_tables_rank4_first.log", [4], [], "rank 4 raised Exception: exit code 1"),
    ("parlai_srun_tasks_world_size_mismatch.log", [], NOBODY, "NCCL error"),
    ("accelerate_vqgan_broadcast_vs_allreduce.log", [], [3, 7], "at odds at collective #80078"),
    ("swift_minicpm_broadcast_sizes_differ.log", [], [2, 3, 0, 1], "broadcast of 24084544 elements"),
    ("alpaca_remote_error_ib_one_line.log", [], NOBODY, "InfiniBand completion error 12"),
    ("nccl_tests_ib_error4_service_thread.log", [], NOBODY, "InfiniBand completion error 4"),
    ("pid_diffusion_gloo_broadcast_closed.log", [], [], "connection closed by 10.0.1.17"),
    ("cppo_grpo_sigkill_rank0_no_other.log", [0], [], "rank 0 raised Signal 9 (SIGKILL)"),
    ("longchat_sigkill_local_rank4.log", [], [4], "local rank 4 ended by signal 9 (SIGKILL)"),
    ("qwen3coder_oom_rank3_docker_stamp.log", [3], [], "rank 3 raised torch.OutOfMemoryError"),
    ("qlora_pipe_illegal_memory_rank1.log", [1], [], "rank 1 raised CUDA error: an illegal memory access"),
    ("lmdeploy_what_on_its_own_line_rank3.log", [3], [], "rank 3 raised CUDA error: an illegal memory access"),
    ("nccl_tests_mpirun_ib_error4_link_local.log", [], NOBODY, "InfiniBand completion error 4 from peer fe80::"),
    ("nccl_ibp_status12_one_line.log", [], NOBODY, "InfiniBand completion error 12 from peer 7.6.13.83"),
    ("autocast_post_fit_barrier_rank0_elided.log", [], [0], "rank 0 waits in all_reduce (its number not in the log)"),
    ("prompt4nr_spawn_sigkill_process0.log", [], [0], "process 0 ended by signal 9 (SIGKILL)"),
    ("hybrik_spawn_sigkill_process3_progress_bar.log", [], [3], "process 3 ended by signal 9 (SIGKILL)"),
    ("acumen_spawn_sigkill_loguru_frames.log", [], [0], "as torch.multiprocessing.spawn says"),
    ("vllm_pg4_guid19_illegal_memory_rank1.log", [1], [], "rank 1 raised CUDA error: an illegal memory access"),
    ("vllm_failed_execution_dump_illegal_memory_rank0.log", [0], [], "rank 0 raised CUDA error"),
    ("llama_cookbook_unspecified_launch_rank0_torch21.log", [0], [], "rank 0 raised CUDA error: unspecified launch"),
    ("deepseek_moe_unspecified_launch_rank1.log", [1], [], "rank 1 raised CUDA error: unspecified launch"),
    ("nccl_tests_nvls_cuda_failure_fabric_manager.log", [], NOBODY, "the node's NVLink fabric"),
    ("xtuner_monitored_barrier_check_rank0.log", [0], [], "rank 0 never answered a peer's monitored barrier"),
    ("colossalai_sigkill_local_rank3.log", [], [3], "local rank 3 ended by signal 9 (SIGKILL)"),
    ("xflux_accelerate_deepspeed_sigkill_local_rank0.log", [], [0], "local rank 0 ended by signal 9 (SIGKILL)"),
    ("uniter_horovod_shutdown_mpirun_first_rank0.log", [0], [], "mpirun's first observed failure"),
    ("verl_duplicate_gpu_reversed_lines.log", [], NOBODY, "ranks 1 and 9 both on CUDA device 34000"),
    ("mambair_duplicate_gpu_launch_module.log", [], NOBODY, "ranks 0 and 2 both on CUDA device 4000"),
    ("megatron_duplicate_gpu_glued_writes.log", [], NOBODY, "ranks 2 and 3 both on CUDA device e2000"),
    (
        "timm_torch20_launch_exit2_rank1.log",
        [],
        NOBODY,
        "rank 1 exited with code 2: exit code 2 is Python's usage error",
    ),
    ("kair_every_rank_exit2_alike.log", [], NOBODY, "ranks 1-4 exited with code 2"),
    ("llamafactory_root_cause_rank5_no_other.log", [5], [], "rank 5 raised Exception: exit code 1"),
]

TRUTHS: dict[str, dict[str, object]] = json.loads((REAL / "truths.json").read_text())
"""Per log: its source, kind, framework, launcher, truth (ranks, ``none`` or ``unknown``) and why."""
KNOWN = sorted((name, told["truth"]) for name, told in TRUTHS.items() if told["truth"] != "unknown")


def test_every_real_log_is_listed_and_has_notes_and_a_truth() -> None:
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(name for name, *_ in VERDICTS)
    notes = (REAL / "NOTES.md").read_text()
    sections = re.findall(r"^## (\S+\.log)$", notes, re.MULTILINE)
    assert sorted(sections) == sorted(name for name, *_ in VERDICTS)
    assert sorted(TRUTHS) == sorted(name for name, *_ in VERDICTS)
    for told in TRUTHS.values():
        assert {"source", "kind", "framework", "launcher", "truth", "why"} <= told.keys()
        assert str(told["source"]).startswith("https://github.com/") and told["why"]
        assert told["truth"] in ("none", "unknown") or (isinstance(told["truth"], list) and told["truth"])


@pytest.mark.parametrize(("name", "proven", "suspects", "words"), VERDICTS, ids=[v[0] for v in VERDICTS])
def test_each_real_log_is_read_and_judged(name: str, proven: list[int], suspects: list[int] | str, words: str) -> None:
    analysis = analyze([str(REAL / name)])
    verdict = assign_blame(analysis)
    shown = render_analysis(analysis)
    assert analysis.logs == 1, shown
    assert verdict.culprits == proven, shown
    if suspects == NOBODY:
        assert verdict.nobody is not None and not verdict.suspects, shown
        assert "NOBODY TO BLAME" in shown and "CULPRIT" not in shown
    else:
        assert verdict.nobody is None
        assert [s.rank for s in verdict.suspects[: len(suspects)]] == suspects, shown
    if verdict.suspects and not proven:
        assert "suspected" in verdict.headline and "SUSPECTED" in shown and "CULPRIT" not in shown
    assert words in verdict.headline, verdict.headline
    assert "0.0s" not in shown


@pytest.mark.parametrize(("name", "truth"), KNOWN, ids=[name for name, _ in KNOWN])
def test_the_truth_leads_and_no_innocent_is_proven(name: str, truth: list[int] | str) -> None:
    verdict = assign_blame(analyze([str(REAL / name)]))
    if truth == "none":
        assert verdict.nobody is not None and not verdict.culprits and not verdict.suspects
        return
    lead = verdict.culprits[:1] or [s.rank for s in verdict.suspects[:1]]
    assert lead and lead[0] in truth
    assert set(verdict.culprits) <= set(truth)


@pytest.mark.parametrize("name", sorted(TRUTHS))
def test_the_command_reads_every_real_log_to_json(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(REAL / name), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert {"culprits", "suspects", "nobody", "summary"} <= found.keys()


def test_the_json_keeps_proven_and_suspected_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(REAL / "ofa_torch112_two_absent.log"), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["culprits"] == [] and found["nobody"] is None
    assert [s["rank"] for s in found["suspects"]] == [0, 4, 5]
    assert "rank 0 most often works alone" in found["suspects"][0]["why"]
    assert {s["why"] for s in found["suspects"][1:]} == {"no line in the log"}
    assert {"culprits", "summary", "ranks", "missing", "evidence", "alerts", "problems"} <= found.keys()


def test_suspects_with_one_reason_are_one_line() -> None:
    shown = render_analysis(analyze([str(REAL / "llamafactory_heartbeat_rank144.log")]))
    assert "    ranks 1-143: no line in the log" in shown
    assert shown.count("no line in the log") < 6
