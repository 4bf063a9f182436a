"""``distmon doctor``: check this machine, or a job about to start, and say what will go wrong.

    distmon doctor
    distmon doctor --workers 8 -- torchrun --nproc-per-node=4 train.py
    torchrun --nproc-per-node=4 -m distmon.doctor --collectives

Prints a pass/warn/fail table with a fix for each problem (``--json`` for scripts) and exits
1 when anything fails. torch is imported only to check it, so the doctor runs where the
monitor runs too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from distmon.doctor import host, network
from distmon.doctor.dumps import dumps_check
from distmon.doctor.launch_command import Launch, check_launch, parse_launch
from distmon.doctor.results import Check, exit_code, passed, table, to_json
from distmon.doctor.torch_env import (
    cuda_check,
    flight_recorder_check,
    gpus_check,
    ranks_per_node,
    torch_check,
    torch_facts,
    visible_devices_check,
)
from distmon.guards import values

C10D_PORT = 29400
"""torchrun's port for ``--rdzv-endpoint`` given without one."""
SMOKE_TEST = (
    "torchrun --nproc-per-node=N -m distmon.doctor --collectives "
    "[--backend gloo|nccl] [--timeout S] [--size-mb MB] [--rounds N]"
)


def inside_a_rank(env: Mapping[str, str]) -> bool:
    """Started by a launcher as one rank of a job: where ``--collectives`` runs."""
    return "RANK" in env and "WORLD_SIZE" in env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nproc-per-node", metavar="N", help="processes per node the job starts (default: from the command)"
    )
    parser.add_argument(
        "--workers",
        type=values.whole_option(0, 1024),
        metavar="N",
        help="DataLoader workers per rank, for the /dev/shm check",
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    inside = inside_a_rank(os.environ)
    smoke = parser.add_argument_group(
        "collectives smoke test, inside each rank: torchrun ... -m distmon.doctor --collectives"
    )

    def shown(text: str) -> str:
        """Outside a rank, where ``--collectives`` is refused, the smoke test's options are
        not listed: the epilog gives its command instead."""
        return text if inside else argparse.SUPPRESS

    smoke.add_argument(
        "--collectives", action="store_true", help=shown("time and check barrier, all_reduce and broadcast")
    )
    smoke.add_argument("--backend", choices=("gloo", "nccl"), help=shown("default: nccl with GPUs, else gloo"))
    smoke.add_argument(
        "--timeout",
        type=values.option(0.1, 3600),
        default=60.0,
        help=shown("seconds for each collective and for the answers"),
    )
    smoke.add_argument(
        "--size-mb",
        type=values.option(0.001, 65536),
        default=4.0,
        help=shown("all_reduce and broadcast size (default 4)"),
    )
    smoke.add_argument(
        "--rounds",
        type=values.whole_option(1, 1000),
        default=5,
        help=shown("timed runs of each collective (default 5)"),
    )
    if not inside:
        parser.epilog = f"The collectives smoke test runs inside each rank: {SMOKE_TEST}"
    parser.add_argument("launch", nargs=argparse.REMAINDER, help="the launch command to check, after --")


def run(args: argparse.Namespace) -> int:
    if args.collectives:
        if not inside_a_rank(os.environ):
            print(f"distmon doctor: --collectives runs inside each rank: {SMOKE_TEST}", file=sys.stderr)
            return 2
        from distmon.doctor.collective_smoke import run_in_rank

        return run_in_rank(args)
    command = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    checks = machine_checks(parse_launch(command) if command else None, args.nproc_per_node, args.workers, os.environ)
    print(to_json(checks) if args.json else table(checks))
    return exit_code(checks)


def machine_checks(
    launch: Launch | None, nproc: str | None, workers: int | None, env: Mapping[str, str]
) -> list[Check]:
    facts = torch_facts()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    nproc = nproc or (launch.nproc_per_node if launch else None)
    ranks = ranks_per_node(nproc, facts, cpus)
    checks = [torch_check(facts, launch is not None), cuda_check(facts)]
    gpus = gpus_check(nproc, ranks, facts)
    if gpus is not None:
        checks.append(gpus)
    checks.append(visible_devices_check(env.get("CUDA_VISIBLE_DEVICES"), facts))
    recorder = flight_recorder_check(facts, env)
    if recorder is not None:
        checks.append(recorder)
    if facts.version is not None and not facts.error:
        checks.append(dumps_check(env, facts.nccl is not None))
    checks.extend(_launch_rendezvous_checks(launch, env))
    checks.extend(host.machine_host_checks(ranks or 1, workers, len(facts.gpus)))
    if launch is not None:
        checks.extend(check_launch(launch, os.getcwd(), env))
    return checks


def _launch_rendezvous_checks(launch: Launch | None, env: Mapping[str, str]) -> list[Check]:
    """The address the ranks will meet at, as torchrun (or the environment) will set it."""
    if launch is not None and "--standalone" in launch.flags:
        return [passed("rendezvous", "torchrun --standalone picks a free local port: nothing to check")]
    option = launch.option if launch is not None else lambda _name: None
    nnodes = launch.nnodes if launch is not None else 1
    endpoint = option("--rdzv-endpoint")
    if endpoint:
        addr, _, port = endpoint.rpartition(":") if ":" in endpoint else (endpoint, "", str(C10D_PORT))
        return network.rendezvous_checks(addr.strip("[]"), port, nnodes, None)
    addr = option("--master-addr") or env.get("MASTER_ADDR") or "127.0.0.1"
    port = option("--master-port") or env.get("MASTER_PORT") or str(network.DEFAULT_PORT)
    node_rank = option("--node-rank") or env.get("NODE_RANK") or env.get("GROUP_RANK")
    is_master = None if node_rank is None else node_rank.strip() == "0"
    return network.rendezvous_checks(addr, port, nnodes, is_master)
