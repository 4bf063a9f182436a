"""The collectives smoke test, run inside every rank under torchrun::

    torchrun --nproc-per-node=4 -m distmon.doctor --collectives

Each rank joins the process group and times barrier, all_reduce and broadcast, checking
their results. The ranks report through torchrun's key-value store rather than through the
collectives under test, so when those break rank 0 can still say which ranks failed, were
slow or never answered, and whether every rank runs the same versions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import distmon
from distmon.doctor.results import Check, exit_code, failed, passed, table, to_json, warned

OPS = ("barrier", "all_reduce", "broadcast")
SLOW_FACTOR = 3.0
SLOW_MARGIN = 0.010
"""A rank is slow at an op when it takes SLOW_FACTOR times the ranks' median and SLOW_MARGIN
seconds more: a loopback collective's times differ by noise well inside that margin, and noise
is not news."""
POLL = 0.1
VERDICT = "verdict"


@dataclass
class RankResult:
    rank: int
    host: str
    local_rank: int
    versions: dict[str, str]
    init: float | None = None
    """Seconds to join the process group."""
    times: dict[str, float] = field(default_factory=dict)
    """Median seconds per op."""
    failed_at: str | None = None
    """``init`` or the op that failed."""
    error: str | None = None


def run_in_rank(args: argparse.Namespace) -> int:
    """Run in a rank: test, publish, and on rank 0 wait for every rank and print the verdict."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store, _, _ = next(dist.rendezvous("env://", timeout=datetime.timedelta(seconds=args.timeout)))
    prefix = f"distmon-doctor/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
    result = test_rank(dist.PrefixStore(prefix + "pg", store), rank, world, args)
    if result.error:
        print(
            f"distmon doctor: rank {rank} ({result.host}): {result.failed_at} failed: {result.error}", file=sys.stderr
        )
    results_store = dist.PrefixStore(prefix + "result", store)
    results_store.set(str(rank), json.dumps(asdict(result)))
    if rank != 0:
        # torchrun stops every rank once one exits with an error: stay until rank 0 has spoken.
        spoken = _wait_key(results_store, VERDICT, deadline=time.monotonic() + 2 * args.timeout)
        return 1 if result.error and not spoken else 0
    results = collect(results_store, world, deadline=time.monotonic() + args.timeout)
    checks, rows = assess(results, world, args.timeout)
    print(to_json(checks, ranks=rows) if args.json else table(checks) + "\n\n" + rank_table(rows), flush=True)
    results_store.set(VERDICT, str(exit_code(checks)))
    return exit_code(checks)


def test_rank(pg_store: Any, rank: int, world: int, args: argparse.Namespace) -> RankResult:
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = args.backend or ("nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo")
    result = RankResult(rank, socket.gethostname(), local_rank, _versions(torch))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", local_rank % max(torch.cuda.device_count(), 1))
        torch.cuda.set_device(device)
    start = time.perf_counter()
    try:
        dist.init_process_group(
            backend, store=pg_store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=args.timeout)
        )
    except Exception as e:
        result.failed_at, result.error = "init", _short(e)
        return result
    result.init = time.perf_counter() - start
    tensor = torch.empty(max(1, int(args.size_mb * 1024 * 1024 / 4)), dtype=torch.float32, device=device)
    for op in OPS:
        try:
            result.times[op] = _time_op(op, tensor, rank, world, args.rounds)
        except Exception as e:
            result.failed_at, result.error = op, _short(e)
            return result  # the group is not to be trusted any more: no destroy, which could hang
    dist.destroy_process_group()
    return result


def _time_op(op: str, tensor: Any, rank: int, world: int, rounds: int) -> float:
    """Median seconds of ``rounds`` runs after one warm-up, each result checked."""
    import torch
    import torch.distributed as dist

    def sync() -> None:
        if tensor.is_cuda:
            torch.cuda.synchronize(tensor.device)

    times = []
    for i in range(rounds + 1):
        if op == "all_reduce":
            tensor.fill_(rank + 1)
        elif op == "broadcast":
            tensor.fill_(42.0 if rank == 0 else -1.0)
        sync()
        start = time.perf_counter()
        if op == "barrier":
            dist.barrier()
        elif op == "all_reduce":
            dist.all_reduce(tensor)
        else:
            dist.broadcast(tensor, src=0)
        sync()
        if i:
            times.append(time.perf_counter() - start)
        expected = world * (world + 1) / 2 if op == "all_reduce" else 42.0
        if op != "barrier" and not (tensor[0].item() == expected and tensor[-1].item() == expected):
            raise ValueError(f"wrong result: {tensor[0].item():g}, expected {expected:g}")
    return statistics.median(times)


def _wait_key(store: Any, key: str, deadline: float) -> bool:
    while not store.check([key]):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


def collect(results_store: Any, world: int, deadline: float) -> dict[int, RankResult]:
    """Every rank's result that arrives before ``deadline``."""
    results: dict[int, RankResult] = {}
    while len(results) < world and time.monotonic() < deadline:
        for rank in range(world):
            if rank not in results and results_store.check([str(rank)]):
                results[rank] = RankResult(**json.loads(results_store.get(str(rank))))
        if len(results) < world:
            time.sleep(POLL)
    return results


def assess(results: dict[int, RankResult], world: int, timeout: float) -> tuple[list[Check], list[dict[str, Any]]]:
    """The verdict on a whole job's results: pure, so that failures are testable from data."""
    missing = [r for r in range(world) if r not in results]
    checks = [_ranks_check(missing, world, timeout), _init_check(results, missing)]
    for op in OPS:
        check = _op_check(op, results)
        if check is not None:
            checks.append(check)
    checks.append(_versions_check(results))
    return checks, [_row(r, results.get(r)) for r in range(world)]


def _ranks_check(missing: list[int], world: int, timeout: float) -> Check:
    if missing:
        return failed(
            "ranks",
            f"{_ranks(missing)} gave no result within {timeout:g}s of rank 0: stopped, hung or dead",
            "look at those ranks' output (torchrun --tee 3, or --log-dir) and run distmon doctor on their nodes",
        )
    return passed("ranks", f"all {world} ranks answered")


def _init_check(results: dict[int, RankResult], missing: list[int]) -> Check:
    failures = sorted(r for r, res in results.items() if res.failed_at == "init")
    if failures:
        error = results[failures[0]].error
        fix = "check MASTER_ADDR/MASTER_PORT and the network between nodes (distmon doctor on each node)"
        if missing:
            them = "it" if len(missing) == 1 else "them"
            fix = f"{_ranks(missing)} never joined and the others waited for {them}: start there"
        return failed("init", f"init_process_group failed on {_ranks(failures)}: {error}", fix)
    joined = [res.init for res in results.values() if res.init is not None]
    return passed("init", f"{len(joined)} ranks joined the process group in {max(joined, default=0):.2f}s at most")


def _op_check(op: str, results: dict[int, RankResult]) -> Check | None:
    failures = sorted(r for r, res in results.items() if res.failed_at == op)
    times = {r: res.times[op] for r, res in results.items() if op in res.times}
    if failures:
        error = results[failures[0]].error
        return failed(
            op,
            f"{op} failed on {_ranks(failures)}: {error}",
            "if the others finished, the failing ranks' nodes are the suspects: run distmon doctor there",
        )
    if not times:
        return None
    median = statistics.median(times.values())
    slow = sorted(r for r, t in times.items() if t > SLOW_FACTOR * median and t - median > SLOW_MARGIN)
    if slow:
        worst = max(slow, key=lambda r: times[r])
        return warned(
            op,
            f"{op} slow on {_ranks(slow)}: rank {worst} took {_ms(times[worst])}, the median rank {_ms(median)}",
            "look at those ranks' nodes: their GPU, NIC or CPU load (nvidia-smi, top)",
        )
    fastest, slowest = min(times.values()), max(times.values())
    return passed(op, f"{len(times)} ranks, {_ms(fastest)} to {_ms(slowest)} per {op}")


def _versions_check(results: dict[int, RankResult]) -> Check:
    groups: dict[str, list[int]] = {}
    for rank, res in sorted(results.items()):
        groups.setdefault(_describe(res.versions), []).append(rank)
    if len(groups) > 1:
        parts = "; ".join(f"{_ranks(ranks)}: {versions}" for versions, ranks in groups.items())
        return failed(
            "versions",
            f"ranks run different versions: {parts}",
            "install the same torch, CUDA, NCCL and Python on every node (one container image or environment)",
        )
    if not groups:
        return warned("versions", "no rank answered", "see the ranks check")
    return passed("versions", f"{next(iter(groups))} on every rank")


def _row(rank: int, res: RankResult | None) -> dict[str, Any]:
    if res is None:
        return {"rank": rank, "host": None, "result": "no result", **dict.fromkeys(("init", *OPS))}
    status = f"{res.failed_at} failed" if res.failed_at else "ok"
    return {"rank": rank, "host": res.host, "result": status, "init": res.init, **{op: res.times.get(op) for op in OPS}}


def rank_table(rows: list[dict[str, Any]]) -> str:
    header = ["rank", "host", "init", *OPS, "result"]
    lines = [header] + [
        [str(row["rank"]), row["host"] or "-", _secs(row["init"]), *(_ms(row[op]) for op in OPS), row["result"]]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def _versions(torch: Any) -> dict[str, str]:
    nccl = None
    if torch.cuda.is_available() and torch.distributed.is_nccl_available():
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "nccl": nccl or "none",
        "python": platform.python_version(),
        "distmon": distmon.__version__,
    }


def _describe(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {value}" for name, value in versions.items())


def _ranks(ranks: list[int]) -> str:
    """``ranks 0-3, 6`` for [0, 1, 2, 3, 6]."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    text = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
    return f"rank {text}" if len(ranks) == 1 else f"ranks {text}"


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _secs(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}s"
