"""A small DDP training job on CPU (gloo) that can break in each of the ways real jobs do.

Run it under torchrun (or one process per rank with ``srun`` or ``mpirun``, ``MASTER_ADDR``
and ``MASTER_PORT`` set); distmon watches it when ``--distmon`` is given (the one line a user
adds) or when launched with ``distmon run``::

    torchrun --nproc_per_node=4 examples/train.py --distmon --fault hang --fault-rank 2
    MASTER_ADDR=$(hostname) MASTER_PORT=29500 distmon run --record run.distmon -- srun -n 4 python examples/train.py

Faults (``--fault``), injected on ``--fault-rank`` at ``--fault-step``:

- ``hang``: the rank sleeps before its next collective (a stuck rank)
- ``extra-collective``: the rank issues a barrier the others do not (rank-conditional code)
- ``uneven``: the rank runs out of data a step early and goes to the end-of-epoch barrier
- ``exception``: the rank raises
- ``sigkill``: the rank kills itself with SIGKILL (the OOM killer, a node going away)
- ``worker-kill``: one of the rank's DataLoader workers is killed with SIGKILL
- ``gil``: the rank blocks in native code holding the GIL
- ``late-init``: the rank sleeps before ``init_process_group`` (a node late to start)
- ``loader-block``: the rank's DataLoader worker blocks in ``__getitem__`` (a dead NFS
  mount); ``--fault-rank -1`` blocks every rank's
- ``straggler``: the rank is slower on every step from the start (or from STEP),
  ``--straggler-factor`` times the others' ``--step-time``
- ``leak``: the rank keeps every batch in a list, so its memory grows step over step
- ``stop``: the rank stops itself with SIGSTOP (a debugger, ``kill -STOP``, a scheduler's
  suspend); a helper process sends SIGCONT after SECONDS
- ``fifo-save``: the rank saves its checkpoint with ``torch.save`` to a FIFO, whose open
  blocks in the kernel (a hung NFS or Lustre mount) until a helper reads it after SECONDS
- ``checkpoint``: the rank writes a checkpoint for SECONDS (``torch.save`` and fsync, over
  and over) while the others wait at a barrier: a healthy pause, not a hang
- ``slow-import``: before its first step the rank imports a module that takes SECONDS of
  CPU (a big library, a JIT build) while the others wait in the first collective
- ``regex``: a regular expression that backtracks for SECONDS on the training thread: one
  long C call that burns CPU and holds the GIL
- ``upload-hang``: the rank's metrics upload at STEP (see ``--habit upload``) never returns:
  the service does not answer for SECONDS

``--fault`` may be repeated, each as ``KIND@STEP[:RANK[:SECONDS]]`` (STEP counted across
epochs; a part left out comes from ``--fault-step``, ``--fault-rank`` and ``--hang-seconds``),
so that one job carries several faults in turn: ``hang``, ``gil``, ``straggler`` and ``leak``
last SECONDS and the job trains on, so they can come before a fault that ends it::

    torchrun --nproc_per_node=4 examples/train.py --distmon --fault straggler@60:2:25 --fault leak@60:2:25

Habits (``--habit KIND@EVERY[:RANK[:SECONDS]]``, rank 0 by default) are pauses a healthy
job takes every EVERY steps and always comes out of, while the other ranks wait:

- ``upload``: the rank posts its metrics to a slow service (a synchronous HTTP call, as an
  experiment tracker's client makes), asleep in a socket read until it answers
- ``evaluate``: the rank evaluates alone (CPU work) before its next collective
- ``gc``: the rank holds the GIL while it burns CPU, as a long garbage-collection pass does
- ``checkpoint``: the rank writes a checkpoint while the others wait at a barrier

Each fault prints its own ``[train] rank R: injecting KIND at step S, t=T`` line; a habit
prints none.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import http.server
import importlib
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FAULTS = (
    "none",
    "hang",
    "extra-collective",
    "uneven",
    "exception",
    "sigkill",
    "worker-kill",
    "gil",
    "straggler",
    "leak",
    "late-init",
    "loader-block",
    "stop",
    "fifo-save",
    "checkpoint",
    "slow-import",
    "regex",
    "upload-hang",
)
AT_A_STEP = ("hang", "extra-collective", "exception", "sigkill", "worker-kill", "gil", "stop", "fifo-save", "regex")
"""Faults injected once, when the rank reaches their step."""
HABITS = ("upload", "evaluate", "gc", "checkpoint")


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    """The rank it is injected on; -1 for every rank (``loader-block``)."""
    step: int
    """Counted across epochs."""
    seconds: float
    """How long a hang, a held GIL, a blocked read or a late start lasts, or a straggler
    straggles and a leak leaks."""

    def on(self, rank: int) -> bool:
        return self.rank in (rank, -1)


class Noise(Dataset):
    def __init__(self, size: int, dim: int, block: tuple[int, float] | None = None) -> None:
        self.size, self.dim = size, dim
        self.block = block
        """(first sample index, seconds): from that sample on, reading one blocks that long."""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.block is not None and i >= self.block[0]:
            worker = torch.utils.data.get_worker_info()
            announce(int(os.environ.get("RANK", "-1")), f"loader-block(worker-{worker.id})", i)
            time.sleep(self.block[1])  # a read from a dead NFS mount
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), torch.randn(1, generator=g)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        type=fault_spec,
        metavar="KIND[@STEP[:RANK[:SECONDS]]]",
        help=f"inject a fault, one of {', '.join(FAULTS)}; repeat for several",
    )
    p.add_argument(
        "--habit",
        action="append",
        default=[],
        type=habit_spec,
        metavar="KIND@EVERY[:RANK[:SECONDS]]",
        help=f"a pause the job takes every EVERY steps, one of {', '.join(HABITS)}; repeat for several",
    )
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=20)
    p.add_argument("--hang-seconds", type=float, default=600.0)
    p.add_argument("--leak-mb", type=float, default=4.0, help="memory a leaking rank keeps per step")
    p.add_argument(
        "--straggler-factor", type=float, default=4.0, help="a straggler's step time, as a multiple of --step-time"
    )
    p.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    p.add_argument("--distmon", action="store_true", help="attach distmon's hook")
    args = p.parse_args()
    args.faults = [resolve(spec, args) for spec in args.fault if spec[0] != "none"]
    return args


Spec = tuple[str, int | None, int | None, float | None]


def fault_spec(text: str) -> Spec:
    """``KIND[@STEP[:RANK[:SECONDS]]]``, a part left out as None."""
    kind, _, where = text.partition("@")
    parts = where.split(":") if where else []
    try:
        if kind not in FAULTS or len(parts) > 3:
            raise ValueError
        step, rank, seconds = [*parts, "", "", ""][:3]
        return kind, int(step) if step else None, int(rank) if rank else None, float(seconds) if seconds else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not KIND[@STEP[:RANK[:SECONDS]]]: {', '.join(FAULTS)}") from None


def habit_spec(text: str) -> Fault:
    """``KIND@EVERY[:RANK[:SECONDS]]`` as a :class:`Fault` whose ``step`` is the period."""
    kind, _, where = text.partition("@")
    every, rank, seconds = [*where.split(":"), "", ""][:3]
    try:
        if kind not in HABITS or int(every) < 1:
            raise ValueError
        return Fault(kind, int(rank) if rank else 0, int(every), float(seconds) if seconds else 3.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not KIND@EVERY[:RANK[:SECONDS]]: {', '.join(HABITS)}") from None


def resolve(spec: Spec, args: argparse.Namespace) -> Fault:
    """A fault, its parts left out taken from the single-fault options; a straggler given as
    a bare name straggles from the start."""
    kind, step, rank, seconds = spec
    if step is None:
        step = 0 if kind == "straggler" else args.fault_step
    return Fault(
        kind,
        args.fault_rank if rank is None else rank,
        step,
        args.hang_seconds if seconds is None else seconds,
    )


LAUNCHERS = (
    ("RANK", "WORLD_SIZE"),  # torchrun, accelerate launch, deepspeed
    ("SLURM_PROCID", "SLURM_NTASKS"),  # srun, one process per rank
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI's mpirun
    ("PMI_RANK", "PMI_SIZE"),  # MPICH's mpiexec
)


def launched_as() -> tuple[int, int]:
    """This process's rank and world size, as its launcher gave them: srun and mpirun start
    one process per rank and set only their own variables (``MASTER_ADDR`` and
    ``MASTER_PORT`` are the job's to set)."""
    for rank, size in LAUNCHERS:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


def main() -> None:
    args = parse_args()
    rank, world = launched_as()
    for fault in faults_of(args, rank, "late-init"):
        announce(rank, fault.kind, 0)
        time.sleep(fault.seconds)  # loading a checkpoint, or a node slow to come up
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach()
    for fault in faults_of(args, rank, "slow-import"):
        announce(rank, fault.kind, 0)
        slow_import(fault.seconds)  # the others wait in DDP's first broadcast
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    if args.distmon:
        distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    uneven = bool(faults_of(args, rank, "uneven"))
    steps = args.steps - (1 if uneven else 0)
    dataset = Noise(args.steps * args.batch_size * world, 32, block=blocked_sample(args, rank, world))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(dataset, args.batch_size, sampler=sampler, num_workers=args.workers)
    at_a_step = {f.step: f for f in args.faults if f.on(rank) and f.kind in AT_A_STEP}
    checkpoints = {f.step: f for f in args.faults if f.kind == "checkpoint"}
    """Every rank takes part: the one that writes, and the others waiting at the barrier."""
    lasting = [f for f in args.faults if f.on(rank) and f.kind in ("straggler", "leak")]
    uploads = any(h.kind == "upload" and h.on(rank) for h in args.habit)
    service = SlowService(args.faults) if uploads else None
    started: dict[Fault, float] = {}
    """When each straggler or leak began: it lasts its seconds from then."""
    kept: list[torch.Tensor] = []
    for epoch in range(args.epochs):
        for step, (x, y) in enumerate(loader):
            if step >= steps:
                if uneven:
                    announce(rank, "uneven", step)  # out of data one batch early
                break
            now = epoch * args.steps + step
            if now in at_a_step:
                announce(rank, at_a_step[now].kind, now)
                inject(at_a_step[now], worker_pids(), model)
            if now in checkpoints:
                if checkpoints[now].on(rank):
                    announce(rank, "checkpoint", now)
                    save_checkpoint(model, now, checkpoints[now].seconds)
                dist.barrier()
            for habit in args.habit:
                if now and now % habit.step == 0:
                    take_habit(habit, rank, now, model, service)
            for fault in lasting:
                if fault.step == now:
                    announce(rank, fault.kind, now)
                    started[fault] = time.time()
            active = {f.kind for f, t in started.items() if time.time() - t < f.seconds}
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(args.step_time * (args.straggler_factor if "straggler" in active else 1))
            if "leak" in active:
                kept.append(torch.ones(int(args.leak_mb * 1024 * 1024 / 4)))  # 4 MB a step by default
        dist.barrier()
        if rank == 0:
            print(f"epoch {epoch} done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


def faults_of(args: argparse.Namespace, rank: int, kind: str) -> list[Fault]:
    return [f for f in args.faults if f.kind == kind and f.on(rank)]


def blocked_sample(args: argparse.Namespace, rank: int, world: int) -> tuple[int, float] | None:
    """For ``loader-block``: the first sample index (of this rank's shard) whose read blocks."""
    for fault in faults_of(args, rank, "loader-block"):
        return fault.step * args.batch_size * world, fault.seconds
    return None


def announce(rank: int, fault: str, step: int) -> None:
    """The line tests and benchmarks measure detection latency from."""
    print(f"[train] rank {rank}: injecting {fault} at step {step}, t={time.time():.3f}", flush=True)


def inject(fault: Fault, worker_pids: list[int], model: torch.nn.Module) -> None:
    kind = fault.kind
    if kind == "hang":
        time.sleep(fault.seconds)
    elif kind == "extra-collective":
        dist.barrier()
    elif kind == "exception":
        raise ValueError(f"shape mismatch in batch {fault.step}: expected [16, 32], got [16, 31]")
    elif kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "worker-kill" and worker_pids:
        os.kill(worker_pids[0], signal.SIGKILL)
        time.sleep(fault.seconds)  # PyTorch's SIGCHLD handler raises in here
    elif kind == "gil":
        # ctypes.PyDLL keeps the GIL during the call, like a C extension that forgets to
        # release it: every Python thread in the process, distmon's included, stops.
        ctypes.PyDLL(None).sleep(int(fault.seconds))
    elif kind == "regex":
        hold_the_gil(fault.seconds)
    elif kind == "stop":
        later(fault.seconds, f"kill -CONT {os.getpid()}")
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "fifo-save":
        fifo = os.path.join(tempfile.mkdtemp(prefix="ckpt-"), f"step_{fault.step}.pt")
        os.mkfifo(fifo)
        later(fault.seconds, f"timeout 60 cat {fifo} > /dev/null")
        try:
            torch.save(model.state_dict(), fifo)  # torch's C++ writer opens it holding the GIL
        except RuntimeError as e:  # a FIFO cannot be seeked: the save fails once it opens
            print(f"[train] rank {dist.get_rank()}: the save to {fifo} failed once open: {e}", flush=True)


def take_habit(habit: Fault, rank: int, step: int, model: torch.nn.Module, service: SlowService | None) -> None:
    """One of the job's routine pauses: the checkpoint's barrier every rank takes part in."""
    if habit.on(rank):
        if habit.kind == "upload" and service is not None:
            upload_metrics(service, step, habit.seconds)
        elif habit.kind == "evaluate":
            evaluate(habit.seconds)
        elif habit.kind == "gc":
            hold_the_gil(habit.seconds)
        elif habit.kind == "checkpoint":
            save_checkpoint(model, step, habit.seconds)
    if habit.kind == "checkpoint":
        dist.barrier()


class SlowService(http.server.ThreadingHTTPServer):
    """A metrics service that answers each post after the seconds it is asked to take, or,
    for the step of an ``upload-hang`` fault, after that fault's seconds."""

    def __init__(self, faults: list[Fault]) -> None:
        self.stuck = {f.step: f.seconds for f in faults if f.kind == "upload-hang"}
        super().__init__(("127.0.0.1", 0), _SlowHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    server: SlowService

    def do_POST(self) -> None:
        step, seconds = (float(v) for v in self.path.strip("/").split("/"))
        time.sleep(self.server.stuck.get(int(step), seconds))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def upload_metrics(service: SlowService, step: int, seconds: float) -> None:
    """A synchronous post to the metrics service, as an experiment tracker's client makes."""
    if step in service.stuck:
        announce(dist.get_rank(), "upload-hang", step)
    url = f"http://127.0.0.1:{service.server_address[1]}/{step}/{seconds}"
    urllib.request.urlopen(urllib.request.Request(url, data=b'{"loss": 0.1}'), timeout=3600).read()


def evaluate(seconds: float) -> None:
    """An evaluation pass this rank runs alone: CPU work with the GIL released now and then."""
    end = time.time() + seconds
    while time.time() < end:
        sum(range(10_000))


BACKTRACKING = re.compile(r"(a|aa)+b")
"""Matching ``a`` * n takes time that grows by the golden ratio for each ``a`` (the ways to split
n a's into a's and aa's are Fibonacci's), in one C call."""
GROWTH = (1 + math.sqrt(5)) / 2


def hold_the_gil(seconds: float) -> None:
    """Burn CPU for about ``seconds`` in one C call that never releases the GIL (a regular
    expression that backtracks), as a long garbage-collection pass or a C extension does. Timed
    by this thread's CPU, not the clock: on a loaded host a trial waits for a CPU too, and a
    size chosen by the clock would hold the GIL a fraction of ``seconds``. Each "a" more multiplies
    the time by ``GROWTH``: rounded up, the hold is ``seconds`` at least, less than ``GROWTH`` times."""
    n, took = 20, 0.0
    while took < 0.02:
        n += 2
        start = time.thread_time()
        BACKTRACKING.match("a" * n)
        took = time.thread_time() - start
    n += max(0, math.ceil(math.log(seconds / took) / math.log(GROWTH)))
    BACKTRACKING.match("a" * n)


def later(seconds: float, command: str) -> None:
    """Run ``command`` in ``seconds`` from a process of its own: this one may be frozen by then."""
    subprocess.Popen(["sh", "-c", f"sleep {seconds}; {command}"], start_new_session=True)


def save_checkpoint(model: torch.nn.Module, step: int, seconds: float) -> None:
    """A checkpoint that takes ``seconds``: the state saved and synced to disk again and again."""
    path = os.path.join(tempfile.gettempdir(), f"distmon-example-{os.getpid()}-step_{step}.pt")
    state = {"model": model.state_dict(), "optimizer_moments": torch.zeros(2 * 1024 * 1024)}
    end = time.time() + seconds
    try:
        with open(path, "wb") as f:
            while time.time() < end:
                f.seek(0)
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
                time.sleep(0.1)
    finally:
        os.unlink(path)


def slow_import(seconds: float) -> None:
    """Import a module whose top level works for ``seconds``, half of it computing, half waiting
    for a file, as a large library or a JIT build waiting on its compiler does at start-up (half a
    core: busy by any measure, and a test's CPU spared)."""
    directory = tempfile.mkdtemp(prefix="slow-import-")
    with open(os.path.join(directory, "heavy_library.py"), "w") as f:
        f.write(
            f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n"
            "    lap = time.thread_time() + 0.01\n    while time.thread_time() < lap:\n        sum(range(1000))\n"
            "    time.sleep(0.01)\n"
        )
    sys.path.insert(0, directory)
    importlib.import_module("heavy_library")


def worker_pids() -> list[int]:
    """Pids of this rank's DataLoader workers: its child processes."""
    import psutil

    return [c.pid for c in psutil.Process().children()]


if __name__ == "__main__":
    main()
