"""What the tests of the log readers share: the real logs' misses (``tests/data/logs/real``), and
a launcher's lines read as the exits they tell."""

from __future__ import annotations

from distmon.forensics.launcher_lines import LauncherLines
from distmon.forensics.worker_exits import WorkerExit


def read_launcher(text: str) -> list[WorkerExit]:
    """The processes' ends the launcher's lines in ``text`` tell, in order."""
    exits: list[WorkerExit] = []
    lines = LauncherLines(exits.append)
    for line in text.splitlines():
        lines.line(line)
    lines.finish()
    return exits


_HELD_OUT = (
    "held out (rounds 77, 79 to 81, 83, 85, 86 and 88): missed as found; not studied, no rule written against it"
)
"""Why a held-out log is missed is not asked: its misses are counted, not read."""

MISSED = {
    "chainermn_azureml_aks_mpi_launcher_create_communicator_nccl_not_available_in_cupy_image.log": _HELD_OUT,
    "deepmd_kit_horovod_mpirun_conda_mpich_vs_openmpi_ranks_not_detected_all_on_gpu0_oom.log": _HELD_OUT,
    "megatron_lm_torch_distributed_launch_interleaved_pipeline_p2pop_check_op_failure_every_node.log": _HELD_OUT,
    "ms_swift_megatron_cli_dpo_data_iterator_stopiteration_at_step_100_framework_bug.log": _HELD_OUT,
    "nccl_tests_mpirun_two_node_16_rank_gdr_ib_error4_mismatched_collective_warnings_acs_setup.log": _HELD_OUT,
    "nemo_container_25_04_multi_node_32_ranks_nccl_could_not_find_net_id0_fixed_by_nccl_upgrade.log": _HELD_OUT,
    "nemo_nlp_ddp_plugin_two_nodes_num_nodes_default_one_world_size_one_rank1_stuck_store_barrier.log": _HELD_OUT,
    "pipedream_manual_two_process_launch_vgg16_nccl_send_unsupported_old_pytorch_every_rank.log": _HELD_OUT,
    "pytorch_ddp_two_node_nccl_roce_ib_completion_error12_gid_index_mismatch_init_failure.log": _HELD_OUT,
    "pytorch_lightning_k8s_multinode_nccl_226_could_not_find_net_id0_rank2_traceback_nccl_bug.log": _HELD_OUT,
    "rfdetr_lightning_ddp_two_gpus_unused_parameters_runtimeerror_every_rank_strategy_bug.log": _HELD_OUT,
    "rocm_vllm_tp2_dual_gfx1100_rccl_hang_unless_nccl_p2p_disable_platform_p2p_fault.log": _HELD_OUT,
    "torchtitan_torchrun_fsdp_two_gpus_validation_steps_minus_one_ranks_exhaust_data_unevenly_hang.log": _HELD_OUT,
    "torchtitan_torchrun_pp4_zbv_zero_bubble_interleaved_stage_placement_keyerror_on_ranks.log": _HELD_OUT,
    "ultralytics_yolov8_obb_ddp_two_gpus_rank1_distbackenderror_faulty_gpu7_outside_job_nvml.log": _HELD_OUT,
    "xpu_oneccl_xccl_vllm_tp2_two_ranks_hang_create_comm_id_kvs_picks_wrong_interface.log": _HELD_OUT,
    "torchrun_srun_subgroup_allgather_barrier_device_guess_rank4_table.log": (
        "torchrun's table says rank 4 ended first (exit 1, no traceback) while rank 0 waits in a subgroup's "
        "all-gather: that torch's barrier guessed every rank's device wrong in subgroups, only a maintainer's "
        "reading of the script says"
    ),
    "sglang_two_node_tp16_head_node_init_exception_firewall.log": (
        "sglang's TP7 scheduler raised at set-up, its exception cut: that a firewall between the nodes blocked "
        "NCCL's ports, only the thread says"
    ),
    "nccl_tests_mpirun_two_slots_one_gpu_host_rank1_invalid_device_ordinal.log": (
        "rank 1 asked for a GPU its host lacks: the reader says the launch placed it wrong (nobody to blame), "
        "the truth names the rank the placement failed"
    ),
    "nccl_tests_mpirun_tag_output_ranks8_15_invalid_device_ordinal_one_host.log": (
        "ranks 8-15 asked for GPUs their host lacks: the reader says the launch placed them wrong (nobody to "
        "blame), the truth names the ranks the placement failed"
    ),
    "kubeflow_pytorchjob_gloo_worker0_init_hang_istio_sidecar.log": (
        "a worker's store connections and nothing after them: that init_process_group hung behind the pods' "
        "Istio sidecar, only the thread says"
    ),
    "deepspeed_pdsh_2node_azureml_fused_adam_init_both_nodes_fail_every_rank.log": (
        "two hosts' tracebacks in deepspeed.initialize under pdsh's host prefixes, their exception lines cut: "
        "hosts, not ranks, and the error every process met only the thread's title says"
    ),
    "desi_srun_68tasks_knl_task21_oom_kill_node_memory.log": (
        "srun says task 21 ran out of memory in the step's cgroup: that the node was too small for the tile, "
        "not the task's own use, only the thread says"
    ),
    "flux_torch23_8gpu_gemm_rs_local_rank0_first_backend2_cuda_library_bug.log": (
        "torchrun saw local rank 0 fail first (exit 1), no traceback of a rank's in the paste: that all eight "
        "met the same library error, only the thread's title says"
    ),
    "llamacpp_mpirun_8ranks_workers_ggml_assert_n_threads_library_bug.log": (
        "the same GGML assertion in several processes no line gives a rank: a program not torch's, whose "
        "processes the reader does not count as a job's ranks"
    ),
    "llamacpp_mpirun_jetson_4ranks_bad_termination_exit134_mpi_backend_broken.log": (
        "MPICH says one process (a pid, no rank) aborted with exit 134: that llama.cpp's MPI path is broken "
        "for every process, only the thread says"
    ),
    "openrlhf_llmrayactor_vllm016_collective_rpc_failed_version_mismatch.log": (
        "a vLLM engine's collective_rpc failing, its exception cut: that OpenRLHF's code and the newer vLLM "
        "disagree, only the thread says"
    ),
    "pytorch_ci_test_nccl_timeout_rank0_alone_ranks1_2_skip_exit10.log": (
        "PyTorch's own test harness says process 0 exited with code 10: that ranks 1 and 2 skip the "
        "collective by the test's design is in its code, not in the lines"
    ),
    "redrock_srun_128ranks_process114_raised_empty_redshift_slice_too_many_ranks.log": (
        "one process's traceback (114 of 128): that every rank past the work's count fails alike, only the thread says"
    ),
    "returnn_ddp4_gloo_has_data_allreduce_timeout_rank0_absent.log": (
        "ranks 1-3 end alike at once (exit 1), their traceback in RETURNN's own format (locals under each "
        "frame), not read: that they waited in an all_reduce rank 0 never joined is in frames the reader does "
        "not place"
    ),
    "torchrun_rhel_destroy_process_group_local_rank5_first_exit1_cuda_busy_teardown.log": (
        "torchrun saw local rank 5 fail first (exit 1) and tore the others down: that every process fails "
        "alike at teardown on that system, only the thread says"
    ),
    "vllm_apple_silicon_world1_tcpstore_ping_recvvalue_connection_reset.log": _HELD_OUT,
    "verl_taskrunner_workerdict_critic_init_model_fsdp_duplicate_gpu_setup_hook.log": _HELD_OUT,
    "trl_orpo_accelerate_gather_shape_mismatch_every_rank.log": _HELD_OUT,
    "torchdata_dataloader2_gloo_new_group_multinode_every_rank_no_socket_ifname.log": _HELD_OUT,
    "torch1_10_gloo_new_group_after_nccl_init_both_ranks_alike.log": _HELD_OUT,
    "ray_train_torchtrainer_two_hosts_gloo_connection_refused_etc_hosts_127_0_1_1.log": _HELD_OUT,
    "pytorch_fr_profiler_dump_rank0_skips_allgather_after_iter10.log": _HELD_OUT,
    "pytorch1_0_gloo_ioexception_connect_127_0_1_1_refused_node1_hostname_loopback.log": _HELD_OUT,
    "mpirun_tritonserver_trtllm_tp2_mpisize_assert_wrong_dir.log": _HELD_OUT,
    "miss_alignment_lightning_two_gpu_rank1_watchdog_stuck_broken_p2p.log": _HELD_OUT,
    "deepspeed_pipe_fp16_off_stuck_two_ranks_nccl_init.log": _HELD_OUT,
    "vllm_v1_tp8_rtx50_all_eight_workers_raise_multiprocexecutor_fatal_signal.log": _HELD_OUT,
    "vllm_v1_custom_allreduce_invalid_argument_vllmworker0_died_first_alike.log": _HELD_OUT,
    "torchx_torchrec_dlrm_1x2_replica1_worker_cuda_init_error_num_workers_every_rank.log": _HELD_OUT,
    "torch_elastic_launch_missing_optimizer_checkpoint_filenotfound_local_rank0.log": _HELD_OUT,
    "torch_distributed_launch_weights_only_load_failure_rank0_nproc1.log": _HELD_OUT,
    "pytorch_fsdp_mpspawn_inference_mode_grad_fn_assert_both_ranks.log": _HELD_OUT,
    "megatron_bridge_llama3_8b_exit_no_destroy_pg_every_rank.log": _HELD_OUT,
    "llama_recipes_torchrun_fsdp_wrap_prefix_peft_rank0_root_cause.log": _HELD_OUT,
    "litgpt_fabric_fsdp_grad_fn_post_backward_hook_assert_interleaved_ranks.log": _HELD_OUT,
    "horovod_mnist_4node_dataloader_worker_segfault_each_node_alike.log": _HELD_OUT,
    "dynamo_vllm_tp8_custom_allreduce_invalid_argument_every_worker_alike.log": _HELD_OUT,
    "trl_dpo_peft_ddp_rank0_rank1_marked_ready_twice_gradient_checkpointing.log": _HELD_OUT,
    "tacotron2_multiproc_ranks4to7_world4_setup_hang.log": _HELD_OUT,
    "msswift_lora_embedding_ddp_rank4_rank3_reentrant_checkpoint_backward.log": _HELD_OUT,
    "mpspawn_ddp_2x_rtx5090_rank0_watchdog_illegal_memory_access_setup.log": _HELD_OUT,
    "horovodrun_espnet_missing_ranks_code_differs_between_nodes.log": _HELD_OUT,
    "horovod_mpirun_startup_illegal_memory_access_ranks0_2_alike.log": _HELD_OUT,
    "horovod_gloo_50_nodes_http_store_wait_timeout_key0_rank1.log": _HELD_OUT,
    "dlrm_terabyte_8gpu_test_barrier_alltoall_timeout_rank7.log": _HELD_OUT,
    "diffsynth_wan_i2v_rank6_store_recv_0_bytes_after_finish.log": _HELD_OUT,
    "algoperf_wmt_eval_broadcast_timeout_batch_size_desync.log": _HELD_OUT,
    "accelerate_fsdp2_ci_device_side_assert_both_ranks_agent_names_rank0.log": _HELD_OUT,
    "deepspeed_summit_jsrun_mp6_bert_oom_gpu3_setup.log": (
        "one process's out-of-memory error, no rank named, beside NCCL's set-up lines: that the model did not"
        " fit any GPU alike, only the thread says"
    ),
    "accelerate_notebook_launcher_kaggle_elastic_fork_local_rank0_cuda_init_error.log": (
        "process 0's traceback, under the agent's prefix, cut before its error: that CUDA was initialized "
        "before the fork, only the thread says"
    ),
    "vllm_ray_tp4_raylet_oom_kills_two_workers_driver_logits.log": _HELD_OUT,
    "nccl_h100_torchrun_nvls_invalid_argument_every_rank_init.log": _HELD_OUT,
    "megatron_deepspeed_2node_index_cache_doc_idx_filenotfound_both_nodes.log": _HELD_OUT,
    "lightning_ddp_8gpu_nccl_p2p_ipc_hang_after_init_env_fault.log": _HELD_OUT,
    "horovodrun_gloo_tf_rank13_unable_to_find_interface_enp129s0f1_setup.log": _HELD_OUT,
    "horovodrun_gloo_task_servers_no_valid_address_driver_setup.log": _HELD_OUT,
    "horovod_ray_torch_single_worker_sigsegv_background_thread_init.log": _HELD_OUT,
    "horovod_ray_tf_macos_gloo_uv_read_start_worker_died.log": _HELD_OUT,
    "gpt_neox_pdsh_4node_train_script_missing_on_two_nodes.log": _HELD_OUT,
    "finetrainers_wsl2_two_gpus_nccl_cuda_failure_999_rank0_init_setup.log": _HELD_OUT,
    "deepmd_pt_lammps_mpi_comm_assertion_sigabrt_every_rank.log": _HELD_OUT,
    "deepmd_horovodrun_tf_ncclcomminitrank_unhandled_cuda_rank1_every_rank.log": _HELD_OUT,
    "ddp_launch_2gpu_nccl_topology_sysfs_every_rank_alike.log": _HELD_OUT,
    "xla_xrt_rendezvous_init_socket_closed_tpu6_tpu7_every_ordinal.log": _HELD_OUT,
    "xla_xmp_spawn_fn_returns_at_once_process1_mesh_client_connect_failed.log": _HELD_OUT,
    "xla_colab_8core_rendezvous_init_socket_closed_tpu3_tpu4_random.log": _HELD_OUT,
    "verl_ray_taskrunner_npu_hccl_comm_init_ej0001_rankid2.log": _HELD_OUT,
    "ray_train_rocm_4gpu_invalid_device_ordinal_visibility_setup.log": _HELD_OUT,
    "optimum_neuron_llama3_16proc_enc_metaring_devmem_reservation_ranks_alike.log": _HELD_OUT,
    "moco_mp_spawn_transport_endpoint_not_connected_network.log": _HELD_OUT,
    "k8s_ddp_2gpu_first_allreduce_watchdog_nccl_p2p_path_env_fault.log": _HELD_OUT,
    "ipex_llm_vllm_ray_worker_oneccl_atl_no_shm_provider.log": _HELD_OUT,
    "ddp_rocm_aws_ofi_rccl_libfabric122_rank14_hang_at_ddp_init.log": _HELD_OUT,
    "ascend_torchrun_hccl_barrier_ej0001_hccp_init_failed_ranks2_3.log": _HELD_OUT,
    "stylegan3_spawn_gloo_rank1_broadcast_recv_timeout_rank0_plugin_build_hang.log": _HELD_OUT,
    "paddleocr_launch_4_trainers_rank1_2_3_aborted_custom_dataset_code.log": _HELD_OUT,
    "autogluon_tabular_ray_fold_workers_force_cancelled_time_limit.log": _HELD_OUT,
    "applio_rvc_2gpu_process1_rank0_filenotfound_then_process2.log": _HELD_OUT,
    "torchrun_nccl_desync_report_rank0_extra_allreduce_rank1_never_joined.log": (
        "torch's desync report, one rank against one: rank 1 stopped short of collective #3 or rank 0 issued "
        "an extra one rank 1 never would; both are suspected, the report's lagging rank first: which, only the "
        "script says"
    ),
    "torchrun_dynamo_unsupported_distributed_op_rank0_single_proc.log": (
        "Dynamo's logged traceback on rank 0 is cut before its exception: what failed no line says"
    ),
    "torch_pipelining_gloo_batch_p2p_bug_rank0_conn_reset.log": (
        "rank 0 lost its peer, whose lines are not shown: the peer is suspected; that torch's pipelining "
        "sends mismatched on every rank, only the thread says"
    ),
    "megatron_moe_two_thread_alltoall_same_comm_watchdog_every_rank.log": (
        "rank 8 waits alone in an all-to-all of a group the lines show no other rank of: that two threads "
        "shared one communicator on every rank, only the thread says"
    ),
    "lighteval_vllm_dp2_ray_task_no_gpu_setup.log": (
        "a Ray task's traceback in vLLM's engine set-up, cut before its exception: that Ray gave it no GPU, "
        "only the thread says"
    ),
    "flower_ray_vce_client_actor_died_gpu_oversubscribed.log": (
        "Ray says a client actor's worker died, no rank named: that the GPU was oversubscribed by the "
        "resources asked, only the thread says"
    ),
    "deepspeed_zero3_qwen3_moe_allgather_size_mismatch_every_rank.log": (
        "ranks 0 and 3 wait in one all-gather with different sizes: which side is odd the lines do not say; "
        "that ZeRO-3 gathered MoE experts apart on every rank, only the thread's fix says"
    ),
    "chimera_torchrun_nccl_pipeline_hang_rank0_sigabrt.log": (
        "torchrun names rank 0's SIGABRT first, no rank's line shown: suspected; that the pipeline's schedule"
        " hung every rank alike, only the thread says"
    ),
    "cache_dit_ulysses_anything_torchrun_rank2_alltoall_watchdog_lru_cache_desync.log": (
        "rank 2 waits in an all-to-all, the others' lines not shown: suspected; that a cache's desync hit "
        "every rank alike, only the thread says"
    ),
    "sglang_2node_tp16_rank3_pg2_watchdog_idle_dist_timeout.log": _HELD_OUT,
    "modded_nanogpt_rocm_mi300x_torchrun_local_rank5_exit1_torch_build.log": _HELD_OUT,
    "modded_nanogpt_8xh100_torchrun_local_rank0_no_error_file_nccl_version.log": _HELD_OUT,
    "llmc_mpirun_8gpu_dataloader_assert_every_rank_sigabrt.log": _HELD_OUT,
    "bevformer_mmdet_dist_train_rank0_sigkill_at_test_start.log": _HELD_OUT,
    "torchtune_qat_lora_distributed_compile_rank0_traceback_library_bug.log": (
        "rank 0's traceback is cut before its exception: suspected; that a library's bug hit every rank "
        "alike, only the thread says"
    ),
    "prime_rl_torchrun_rank2_exit1_root_cause_trainer_bug_all_ranks.log": (
        "torchrun's root cause is rank 2's exit 1, its traceback not in the log: suspected; that the "
        "trainer's bug hit every rank, only the thread says"
    ),
    "monai_bundle_torchrun_2gpu_rank0_allreduce_watchdog_container_random_timeout_none.log": (
        "rank 0 alone waits in an all-reduce, rank 1's lines not shown: suspected; that the container's set-"
        "up timed out at random, only the thread says"
    ),
    "llama_recipes_torchrun_rank1_and_root_both_exit1_requires_grad_every_rank.log": (
        "torchrun's table lists rank 1's exit 1, its root cause cut: suspected; that every rank raised alike,"
        " only the thread says"
    ),
    "isaaclab_rsl_rl_g1_rank1_illegal_memory_access_nccl_transport.log": (
        "rank 1's illegal memory access is a GPU's fault of its own until the lines show every rank met it: "
        "that NCCL's transport caused it, only the thread says"
    ),
    "streaming_shm_prefix_internal_error_rank6_nonleader.log": (
        "rank 6's shared-memory prefix error alone: that other ranks met the library's race alike only the thread says"
    ),
    "nvrx_torchrun_2node_async_writer_hang_node_rank_flag_setup.log": (
        "no rank's failure or wait: that --node-rank=0 given to both nodes hung the job only the thread says"
    ),
    "mace_patience_rank0_leaves_epoch_loop_allgather_mismatch_rank0.log": (
        "rank 0's collective mismatch cut before the other rank's fingerprint: that rank 0 alone left the epoch "
        "loop only the thread's fix says"
    ),
    "dali_torchrun_8proc_spawn_external_source_iterator_init_failure.log": (
        "DALI's iterator failing to start, no rank named: that every rank builds it alike only the thread says"
    ),
    "torchtitan_k8s_pod_no_dshm_rank0_root_cause_broadcast_shm_full.log": (
        "torchrun's root cause, rank 0, its traceback cut in its first broadcast: that /dev/shm was missing on "
        "every pod only the thread says"
    ),
    "torchrun_c10d_elastic_agent_rejoin_rendezvous_closed_local_rank0.log": (
        "torchrun saw local rank 0 exit 1 and its agent's traceback is cut before its exception: that an agent "
        "was stopped by hand and the rendezvous closed only the thread says"
    ),
    "fairseq_multinode_rank0_dataloader_queue_hang_pyspy.log": (
        "one py-spy stack waiting on the DataLoader's queue, no rank in it: that it is rank 0's the reporter says"
    ),
    "vllm_v1_multiproc_rope_illegal_memory_access_rank2_rank5_alike_none.log": (
        "ranks 2 and 5 raise an illegal memory access, rank 5's whole and rank 2's cut, in the same second: a"
        " GPU's fault is a rank's own until the lines show every rank met it (the thread: a kernel's bug "
        "every rank runs)"
    ),
    "vllm_ray_tp8_rank4_allreduce_timeout_cudagraph_nccl_deadlock.log": (
        "rank 4's lone watchdog timeout beside CUDA graph capture waiting: that NCCL and CUDA graphs deadlock "
        "every rank alike only the thread says"
    ),
    "torchtitan_pp4_fsdp2_multinode_stage_init_shape_inference_hang.log": (
        "every stage waits in shape inference and rank 0 in the store: that a torch bug holds them all only the "
        "thread says"
    ),
    "torch_xla_xmp_spawn_rank0_assert_rank1_waits_rendezvous.log": (
        "XLA's CPU rendezvous shows rank 1 waiting for all participants: that rank 0 asserted the reporter's "
        "script says"
    ),
    "sglang_tp4_tp3_pynccl_unhandled_cuda_error_cu126_image.log": (
        "one process's NCCL unhandled cuda error, no rank named: that the image's CUDA build was at fault only "
        "the thread says"
    ),
    "lmdeploy_ascend_tp4_rank2_broadcast_hccl_fftsplus_timeout_idle.log": (
        "one process's ACL stream synchronize failure, no rank named: that HCCL timed out on an idle broadcast "
        "only the thread says"
    ),
    "nccl_tests_mpirun_rank3_segv_ucx_tls.log": "the lines prove rank 3 crashed first (SIGSEGV); the thread traces "
    "it to the MPI transport's set-up (UCX across containers), which no line says",
    "spawn_process5_daemonic_dataloader_every_rank.log": "one process's traceback, cut: that every process raised "
    "it, the lines do not show",
    "speculators_npu_regression_two_exit1_same_second.log": "the root cause's exit code is cut: ranks 1 and 3 failing "
    "in one second are suspected, not read as alike",
    "mask_propagation_launch_two_procs_one_gpu_last_cmd.log": "the launcher says a worker exited 1, not which; the "
    "cause the thread gives (two processes on one GPU) is in no line",
    "slurm_two_tasks_spawn_worker_count_4_of_2.log": "the barrier's count of 4 in a world of 2 is in the thread's "
    "title, not in the log: its lines show process 1's spawn traceback, cut, which is suspected",
    "torchdata_spawn_process5_rank0_late_http.log": "process 5's traceback is cut before its exception line (the "
    "thread's store timeout waiting for rank 0): the process whose error spawn printed is suspected",
    "gpustack_vllm_mp_store_closed_ranks2_4.log": "two ranks lost the c10d store: its host's process ended first, "
    "how no line says (the thread: the launch's port collision); rank 0, the store's usual host, is suspected",
    "horovod_elastic_benchmark_kills_rank2_repro.log": "rank 2's last line is the script's own word that it will "
    "kill itself; no launcher's or torch's line says a rank ended",
    "horovod_mpirun_rank0_sys_exit_repro_unlabelled.log": "mpirun says one process returned non-zero; its next "
    "block, naming it, is cut, and the output names no rank",
    "horovod_tf_segfault_after_20h_coordinator_race.log": "Open MPI's handler names the crashed process by its pid "
    "only; mpirun's line naming its rank is cut",
    "ray_train_worker0_killed_after_train_func_host_memory.log": "Ray names the dead worker by its pid; only the "
    "program's own [Worker:0] tag, no list of Ray Train's, says its rank",
    "vllm_ray_gather_rank1_custom_allreduce.log": "one rank waits in a gather: its root, absent, is suspected; the "
    "cause the thread gives (vLLM's custom all-reduce) is in no line",
    "weathergen_srun_rank11_allreduce52_env_reinstall.log": "one rank waits in an all-reduce: the absent ranks are "
    "suspected; the cause the thread gives (a broken environment, reinstalled) is in no line",
    "codegeex_megatron_pretrain_illegal_access_timers_sync.log": "a process the log does not name raised a CUDA "
    "illegal memory access; that the set-up was too small for the model (every rank alike) is the thread's word",
    "horovod_torch_optimizer_rewrapped_each_epoch_segv_one_process.log": "Open MPI names the crashed process by pid "
    "alone (no rank is proven); that every rank rewrapped its optimizer is the thread's word, and one process's "
    "crash in Horovod's extension is no sign that all crashed alike",
    "lightning_horovod_rank0_early_stop_rank1_segv_mpi_wait.log": "rank 1's segfault is in the lines; that rank 0 "
    "stopped early before it, no line says",
    "moddednanogpt_eight_procs_four_gpus_agent_names_local_rank7.log": "torchrun names local rank 7's exit; that eight "
    "processes share four GPUs is in the command, not the log",
    "prulong_h20_cu121_sigfpe_agent_table_cut.log": "the agent's table is cut before the ranks' ends",
    "tsn_caffe_mpirun_docker_four_procs_bus_error_rank1_noticed.log": "four glog handler reports in one second, "
    "their signals cut: glog reports a launcher's SIGTERM too, so they do not prove that four processes crashed",
    "c10d_hang_py_rank0_double_numel_allreduce_seq1_eight_ranks.log": "rank 0 alone timed out in the group's first "
    "collective, the others' lines not shown: a first collective that never completes is read as the set-up's (issue "
    "61), and that the others completed it no line says",
    "horovod_tf_rank0_segfault_openmpi_mem_hooks_host_pid_only.log": "Open MPI's handler names the crashed process by "
    "host and pid: its rank no line says",
    "nccl_p2p_use_cuda_memcpy_two_gpus_rank1_allreduce7.log": "rank 1 timed out in an all-reduce, rank 0's lines not "
    "shown: suspected; that NCCL's P2P copy-engine setting hung it, only the thread's fix says",
    "tcpstore_occupied_port_rank3_gdb_stuck_in_doget.log": "a debugger's backtrace of a store client blocked in a "
    "receive, no rank named: that another program held the store's port, only the thread says",
    "accelerate_multi_gpu_stuck_ranks_2_7_allreduce_48490_p2p.log": "two ranks wait in one all-reduce deep into "
    "training: the ranks not shown are suspected; that the GPUs' peer-to-peer path hung it, only the maintainers' "
    "fix says",
    "gloo_allreduce_rank0_smaller_shape_preamble_enforce.log": "gloo received more bytes than its buffer holds: the "
    "ranks' sizes differ; which rank printed it, or whose size is odd, no line says",
    "llama2_70b_torchrun_eight_procs_one_3090_invalid_device_ordinal_interleaved.log": "tracebacks interleaved, none "
    "numbered: an invalid device ordinal is read as the device assignment (the set-up); that ranks 1-7 are those "
    "past the one GPU, only the command says",
    "nanogpt_two_nodes_ddp_crash_fixed_by_nccl_ib_disable.log": "NCCL's watchdog took a process down, no rank, "
    "collective or cause in the lines: that the InfiniBand transport was it, only the thread's fix says",
    "nccl_allreduce_rank0_409600_vs_32768000_others_hang.log": "the program's own prints of each rank's tensor size, "
    "no line of torch's or NCCL's: not read",
    "simpletuner_zero3_validation_rank0_allgather_table_rank1_sigabrt.log": "rank 0 waits alone in an all-gather and "
    "rank 1 ended by SIGABRT (a watchdog's abort, or its own): which came first the lines do not say; that rank 0's "
    "validation issued it alone, only the thread says",
    "torch10_mpi_backend_dataloader_fork_segfault_end_of_epoch.log": "Open MPI names the crashed process by its pid "
    "alone: that a fork under MPI crashes any process alike, only the maintainer says",
    "verl_workerdict_rank3_never_ran_thread_resource_unavailable.log": "Ray's core workers could not start threads "
    "and rank 3's actor never ran: Ray's own abort is not read as the host's limit",
    "yolov5_torch_distributed_run_agent_tcpstore_multi_tenant_typeerror.log": "torchrun's agent's own store raised a "
    "TypeError (a mismatched install) before any worker started: the agent's error handler's JSON is not read",
    "elastic_scale_down_surviving_node_local_rank0_unhandled_system_error_restart.log": "the surviving node's worker "
    "aborted on NCCL's system error: suspected; that its peer was removed on purpose (a scale-down) only the thread "
    "says",
    "detectron2_launch_four_procs_process_group_url_none_alike.log": "four processes logged detectron2's own word on "
    "the process group's URL; that they failed alike at set-up, only that framework's line says: spawn's first process "
    "is suspected",
    "horovod_four_gpus_858_samples_rank3_25_batches_others_26_shut_down.log": "the script's own counts of each rank's "
    "batches, no launcher's or Horovod's line on a rank: that rank 3 ran out first, only those counts suggest",
    "llamafactory_zero3_rm_13b_gpu0_oom_other_procs_contexts_on_gpu0.log": "one process's CUDA OOM, its exception line "
    "alone at the paste's top, other processes' contexts on its GPU: that the device was not set early, only the "
    "thread says (a rank's own OOM shows such contexts too)",
    "megatron_t5_samples_mapping_rank0_builds_12h_socket_timeout.log": "Megatron's word that rank 0 builds the index, "
    "then a traceback cut after its first frame: that the others timed out waiting for it, the lines only suggest",
    "mpi4jax_cuda_mpi_bcast_before_xla_init_mpiexec_rank0_segv_every_rank.log": "mpiexec's one line proves rank 0 "
    "crashed first; that every rank would, only the thread says",
    "mpirun_jacobi_two_gtx1050_read_errno14_both_ranks_rank1_segv.log": "both processes' Open MPI read errors, then "
    "rank 1's SIGSEGV first, as mpirun says: that the MPI is not CUDA-aware, only the thread says",
    "pytorch_broadcast_only_rank0_hang_init_lines.log": "both ranks' process groups set up, then nothing: no line "
    "names a rank; the culprit is in the script only",
    "ray_train_v1_two_nodes_five_workers_nccl_hang_after_pg_setup_gloo_fix.log": "five workers set up their group and "
    "the run began, then nothing fails in the lines: the hang across nodes, only the thread's fix says",
    "searchr1_verl_h20_vllm_logits_sigfpe_workerdict_0_0_cublas.log": "rank 0's Ray actor died, as Ray says: proven; "
    "that every worker meets the same cuBLAS fault, only the thread says",
    "thinkless_verl_four_v100_workerdict_0_2_died_triton_mma_ampere_assert.log": "rank 2's Ray actor died, as Ray "
    "says: proven; that the kernels refuse every V100 alike, only the thread says",
    "torch_mpi_backend_three_ranks_raise_rank0_allgather_hang_pids_only.log": "three processes raised, named by their "
    "pids alone: which ranks they are, no line says",
    "horovod_tf_mpirun_gpu_not_exposed_setup_shutdown_none.log": (
        "only Horovod's shutdown shows (a consequence of a rank's exception or early exit), from a process "
        "the log does not name; the first exception (a GPU the container did not expose, the thread's "
        "finding) is in no line"
    ),
    "verl_ray_k8s_taskrunner_died_pod_memory_limit.log": (
        "Ray says the TaskRunner actor died and may have exceeded the pod's memory limit: a maybe; that it is"
        " verl's controller, no rank, the thread says, not the lines"
    ),
    "roll_ray_actor_infer12_killed_vllm_mm_cache_leak_all_workers.log": (
        "Ray says actor_infer-12 died (a SIGKILL-class exit); that a library's memory leak grew in every "
        "inference worker (the thread's answer) is in no line"
    ),
    "sphereformer_mp_spawn_process2_exit_code1_deliberate_exit_after_validation.log": (
        "mp.spawn says process 2 exited with code 1; that the script calls exit() after validation on "
        "purpose, in every process (the maintainer's answer), no line says"
    ),
    "sphereformer_mp_spawn_one_gpu_process1_invalid_device_ordinal_setup.log": (
        "process 1's traceback under spawn's line is cut before its exception (an invalid device ordinal on a"
        " one-GPU machine, the thread's title): its cut error is suspected; the launch's GPU count is in no "
        "line"
    ),
    "styleavatar_torch_launch_ddp_unused_params_rank1_message_model_structure_every_rank.log": (
        "DDP's unused-parameters error shows its last sentence only (its type and first line cut) and "
        "torchrun's agent names local rank 0 first: that every rank raised it alike (the model's own unused "
        "parameters) the lines do not show"
    ),
    "torchtitan_torchrun_sac_torchfunctionmode_bug_local_rank1_reported_every_rank_none.log": (
        "torchrun's agent names local rank 1 as the first worker that failed (exit code 1) and no worker's "
        "traceback shows: that a framework bug failed every rank alike (the thread) no line shows"
    ),
    "torchtitan_torchrun_dsv3_fsdp_tp_regression_local_rank7_reported_every_rank_alike.log": (
        "torchrun's agent names local rank 7 as the first worker that failed (exit code 1) and no worker's "
        "traceback shows: that a code regression failed every rank alike (the thread) no line shows"
    ),
    "horovod_horovodrun_cpu_gt4_rank3_corrupt_mnist_download_rank0_broadcast_fails.log": (
        "rank 0's traceback in broadcast_parameters is the failure the lines show; that rank 3's own download"
        " was corrupt (the maintainer's answer) is in no line"
    ),
    "openrlhf_ray_reward_func_actor_oom_killed_raylet_get_rewards_workercrashed.log": (
        "Ray says a worker died (a connection error, the OOM killer's kind); that it was the reward "
        "function's actor, no rank, and its memory a leak of the set-up, the thread says, not the lines"
    ),
    "nemo_rl_ray_megatron_moe_ep_cross_rack_alltoall_stall_rank8_stack_none.log": (
        "a stack of rank 8 in an all-to-all is all the lines hold; that the expert-parallel group spanned two"
        " racks (the maintainer's answer) no line says"
    ),
    "wenet_ddp_2node_16gpu_rank0_host_rss_leak_killed.log": (
        "rank 0's per-step lines show its host memory growing; no line says a process was killed (the "
        "reporter's words): growth is no failure the reader names"
    ),
    "wenet_gloo_8node_64gpu_init_hang_backend_setup.log": (
        "the lines show a start-up that never finished, no rank waiting or failing; that gloo at 64 ranks was"
        " the cause (the reporter's fix) no line says"
    ),
    "fairseq_mpspawn_multigpu_rank0_oom_skip_batch_process3_reported.log": (
        "mp.spawn names process 3, whose traceback is in fairseq's all_gather_list; the OOM line naming GPU 0"
        " stands without a rank (fairseq's OOM handler skipped the batch): that rank 0 fell out of step, the "
        "thread says"
    ),
    "trl_ppo_llama2_multigpu_gather_stats_cpu_tensor_allreduce_every_rank_alike.log": (
        "the interleaved tracebacks are read as no rank's; that every rank called all_reduce on a tensor left"
        " on the CPU the thread says"
    ),
    "xdit_pipefusion_end_of_timesteps_heartbeat_hang_pg5_config_bug_none.log": (
        "ranks 0 and 4 wait with their watchdogs stuck in group 5 and the others have no line: they are "
        "suspected; that a configuration of the library hangs every rank (the maintainer) no line says"
    ),
    "ray_horovod_gloo_rendezvous_http_store_timeout_all_workers_none.log": (
        "Horovod's gloo rendezvous timing out on its HTTP store is not read; that its 30 s were too short for"
        " every worker (the fix) is the thread's"
    ),
    "openrlhf_ray_4x4090_nccl_p2p_unsupported_reference_actor_init_none.log": (
        "the lines hold an actor's start-up and NCCL's error without the words of peer access; that the GPUs "
        "lack it (the reporter) no line says"
    ),
    "llmfoundry_composer_launcher_2xa100_first_allgather_watchdog_p2p_none.log": (
        "rank 0 waits in collective #2, not the group's first, and rank 1 has no line: it is suspected; that "
        "peer access between the GPUs hung both (the fix) no line says"
    ),
    "qwenvl_finetune_ds_8xa100_mixed_text_image_rank7_reduce_watchdog_none.log": (
        "rank 7 waits in a reduce and the others have no line: rank 0, the reduce's usual root, is suspected;"
        " that mixed data diverged every rank's path (the thread) no line says"
    ),
    "qwenvl_series_finetune_mixed_dataset_rank0_seq959_others_seq963_watchdog_none.log": (
        "torch 2.1's watchdog lines name no group: whether rank 0's #959 and the others' #963 are of one "
        "group the lines do not say, so nobody is judged"
    ),
    "coqui_trainer_distribute_vits_rank0_test_log_attributeerror.log": (
        "an AttributeError no rank labels reads as the program's own, every rank's; that only rank 0 runs "
        "test_log (Trainer's rank <= 0) the code says, not the lines"
    ),
    "coqui_tts_vits_distribute_hang_step0_rank0_test_log.log": (
        "the lines show both ranks' command lines and training stopped at step 0, no traceback and no rank's "
        "failure: that rank 0 died in test_log (Trainer's rank <= 0) the thread says"
    ),
    "vits_train_ms_mpspawn_process2_emb_g_attributeerror_every_rank.log": (
        "process 2's traceback under spawn's line is cut at its first frame: its AttributeError, which every "
        "process met, only the thread shows"
    ),
    "deepspeed_launcher_2gpu_docker_shm_sigbus_killing_subprocess_none.log": (
        "DeepSpeed's launcher killing its two workers is all the log shows: that the container's shared "
        "memory was too small only the thread says"
    ),
    "jukebox_mpich_hydra_bad_termination_sigkill_rerun_host_state.log": (
        "MPICH's Hydra names a PID killed by SIGKILL, no rank; that the host's state after a first run was "
        "at fault only the thread says"
    ),
    "returnn_gloo_4gpu_cuda_oom_at_first_param_sync_every_worker.log": (
        "one process's CUDA out of memory, its rank in no line; that every worker met it at the same step "
        "only the thread says"
    ),
    "skypilot_spot_two_nodes_worker_node_killed_rank1_exit_barrier.log": (
        "node-0's rank aborted and its agent waited at the exit barrier for the other node's: that node-1, "
        "its rank 1, was killed by hand the thread says, and which rank node-1 held no line does"
    ),
    "torchrun_repro_every_rank_oob_index_watchdog_abort_local_rank0_exit_minus6.log": (
        "torchrun saw local rank 0 abort first; that the repro makes every rank corrupt its CUDA context "
        "alike only the thread's script shows"
    ),
}
"""Logs whose known truth the reader misses, and how: ``benchmarks/bench_real_logs.py`` counts them."""
