"""``distmon analyze`` at scale: one Flight Recorder dump per rank, each of torch's default
2000 entries, in NCCL's shape (TP8 x PP4 x DP, every rank in 21 groups, collectives and
pipeline sends); one rank stuck in its own code, its tensor-parallel peers waiting. Prints a
markdown table: the dumps' size, the time one core takes just to unpickle them (the floor),
the time ``distmon analyze --json`` takes in a process of its own (reading on every core),
their ratio, and the analysis's peak resident memory (the command and its workers).

    .venv/bin/python benchmarks/bench_analyze.py                    # 8192 ranks, some ten minutes
    .venv/bin/python benchmarks/bench_analyze.py --ranks 512        # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

TP, PP = 8, 4
T0_NS = 1_795_000_000_000_000_000


def dump(rank: int, world: int, entries: int, stuck: int) -> bytes:
    """Rank ``rank``'s dump: its groups created in Megatron's order, then steps of a
    tensor-parallel all-reduce, a pipeline send or receive and a data-parallel reduce-scatter
    until ``entries``; in the last step rank ``stuck`` issues nothing and its tensor-parallel
    peers' all-reduce stays pending."""
    dp = world // (TP * PP)
    stride = TP * dp
    tp_first, stage, within = rank - rank % TP, rank // stride, rank % stride
    mine = {
        "0": ("default_pg", list(range(world))),
        f"tp{tp_first}": ("TENSOR_MODEL_PARALLEL_GROUP", list(range(tp_first, tp_first + TP))),
        f"pp{within}": ("PIPELINE_MODEL_PARALLEL_GROUP", list(range(within, world, stride))),
        f"dp{stage}.{rank % TP}": (
            "DATA_PARALLEL_GROUP",
            [stage * stride + d * TP + rank % TP for d in range(dp)],
        ),
    }
    for extra in range(17):  # Megatron's other groups (model parallel, embedding, ...), tensor-parallel sized here
        mine[f"x{extra}.{tp_first}"] = (f"MEGATRON_EXTRA_{extra}", list(range(tp_first, tp_first + TP)))
    pg_ids = {name: i for i, name in enumerate(mine)}
    tp, pp, dpg = list(mine)[1:4]
    pp_ranks = mine[pp][1]
    local = pp_ranks.index(rank)
    out: list[dict[str, Any]] = []
    seq = dict.fromkeys(mine, 0)
    p2p = dict.fromkeys(mine, 0)
    steps = entries // 3
    stuck_tp = stuck - stuck % TP
    for step in range(steps):
        last = step == steps - 1
        if last and rank == stuck:
            break
        for name, op, is_p2p in (
            (tp, "all_reduce", False),
            (pp, f"send {local}->{local + 1}" if local + 1 < PP else f"recv {local}<-{local - 1}", True),
            (dpg, "_reduce_scatter_base", False),
        ):
            if is_p2p:
                p2p[name] += 1
            else:
                seq[name] += 1
            pending = last and tp_first == stuck_tp
            created = T0_NS + (step * 3 + len(out) % 3) * 1_000_000
            out.append(
                {
                    "record_id": len(out),
                    "pg_id": pg_ids[name],
                    "process_group": (name, mine[name][0]),
                    "thread_name": "pt_main_thread",
                    "thread_id": "140000000000000",
                    "collective_seq_id": seq[name],
                    "p2p_seq_id": p2p[name],
                    "op_id": len(out) + 1,
                    "profiling_name": f"nccl:{op}",
                    "time_created_ns": created,
                    "input_sizes": [[4096, 1024]],
                    "input_dtypes": ["BFloat16"],
                    "output_sizes": [[4096, 1024]],
                    "output_dtypes": ["BFloat16"],
                    "state": "scheduled" if pending else "completed",
                    "time_discovered_started_ns": None if pending else created + 1000,
                    "time_discovered_completed_ns": None if pending else created + 2000,
                    "retired": not pending,
                    "timeout_ms": 600_000,
                    "is_p2p": is_p2p,
                }
            )
    status = {
        str(pg_ids[n]): {
            "last_enqueued_collective": seq[n],
            "last_started_collective": -1,
            "last_completed_collective": seq[n],
        }
        for n in mine
    }
    config = {n: {"name": n, "desc": d, "ranks": str(r)} for n, (d, r) in mine.items()}
    return pickle.dumps(
        {"version": "2.10", "comm_lib_version": "2.27.3", "pg_config": config, "pg_status": status, "entries": out},
        protocol=2,
    )


def analyse(folder: Path) -> tuple[float, int, dict[str, Any]]:
    """Seconds, peak resident bytes (the command and its workers together, sampled) and the
    JSON of ``distmon analyze`` in a process of its own."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "distmon", "analyze", str(folder), "--json"], stdout=out)
        peak = 0
        tree = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                rss = tree.memory_info().rss + sum(c.memory_info().rss for c in tree.children(recursive=True))
            except psutil.Error:
                rss = 0
            peak = max(peak, rss)
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        assert proc.returncode == 0
        out.seek(0)
        return seconds, peak, json.loads(out.read())


def unpickle_alone(folder: Path) -> float:
    """Seconds one core takes just to unpickle every dump (the floor, read from disk)."""
    start = time.perf_counter()
    for path in sorted(folder.iterdir()):
        pickle.loads(path.read_bytes())
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=8192)
    p.add_argument("--entries", type=int, default=2000)
    args = p.parse_args()
    stuck = args.ranks // 2 + 3
    with tempfile.TemporaryDirectory(prefix="bench_analyze") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        size = 0
        for rank in range(args.ranks):
            data = dump(rank, args.ranks, args.entries, stuck)
            (folder / f"nccl_trace_rank_{rank}").write_bytes(data)
            size += len(data)
        written = time.perf_counter() - start
        floor = unpickle_alone(folder)
        seconds, peak, found = analyse(folder)
    assert found["culprits"] == [stuck], found["summary"]
    cores = len(os.sched_getaffinity(0))
    print("| ranks | entries a dump | dumps on disk | cores | unpickled, one core | analysed in | ratio | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.ranks} | {args.entries} | {size / 2**30:.2f} GiB | {cores} | {floor:.1f} s | {seconds:.1f} s | "
        f"{seconds / floor:.2f} | {peak / 2**20:.0f} MiB |"
    )
    print(f"\nwritten in {written:.0f} s")
    print(f"\nculprit: {found['summary']}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
