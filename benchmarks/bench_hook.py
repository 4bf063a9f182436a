"""What the rank-side hook costs a training process; prints a markdown table.

    .venv/bin/python benchmarks/bench_hook.py            # everything, about three minutes
    .venv/bin/python benchmarks/bench_hook.py step cpu   # some of it

- ``step``: added time per step of a small CPU model (a ~100 us step on an idle core),
  with and without ``attach()``, in alternating blocks in one process, beside the same
  measurement with no hook (its noise floor); the same step again in a world-1 gloo group,
  where the pace sampler looks about 50 times a second (with no group it naps); then the two
  hooks on the training thread alone (counting a forward, counting an optimizer step), which
  a busy machine cannot blur.
- ``p2p``: added time per point-to-point op on the training thread: two gloo ranks exchange
  small tensors as a pipeline stage does (isend, irecv, both waits), with and without the
  hook in alternating blocks; then the two wrappers alone, and what they add to a 1F1B step.
- ``cpu``: CPU time of the ``distmon-agent`` thread, and of the ``distmon-pace`` thread that
  samples the rank's waits, each read from its own thread clock, while a rank trains
  (world-1 gloo group, DDP, a DataLoader with two workers), as a share of one core.
- ``bytes``: bytes on the wire per rank per second from a 4-rank torchrun job of
  ``examples/train.py`` at the default interval, healthy and while one rank pauses (the
  reports then carry stacks and the op in flight).
- ``memory``: resident memory of the same kind of rank at the end of training, with and
  without the hook, in fresh processes.
- ``encode``: a report made a frame (what the agent does with each report before it sends
  it), a simulated rank's while it steps and while it is stalled, the best of seven runs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples" / "train.py"
MB = 1024 * 1024


def step_cost() -> list[tuple[str, str, str]]:
    """The hook's share of a small training step, with the same measurement done with no
    hook at all beside it (its noise floor), then its two hot-path hooks alone."""
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)

    def train_step() -> None:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    identity = torch.nn.Identity()
    empty = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    with monitoring() as monitor:
        hooked = Alternation(monitor.endpoint, attach=True)
        unhooked = Alternation(monitor.endpoint, attach=False)
        step, step_added = hooked.measure(train_step, model, blocks=101, calls=200)
        _, noise = unhooked.measure(train_step, model, blocks=101, calls=200)
        _, forward_added = hooked.measure(lambda: identity(x), identity, 15, 50_000)
        _, optimizer_added = hooked.measure(empty.step, None, 15, 20_000)
        in_group, in_group_added = in_a_group(lambda: hooked.measure(train_step, model, blocks=61, calls=200))
    forward_own, optimizer_own = own_cost(identity, x)
    return [
        ("added time per step", f"{step_added:+.2f} us on a {step:.0f} us step", "<= 2 us"),
        ("the same without the hook (noise floor)", f"{noise:+.2f} us", ""),
        (
            "the same step in a world-1 gloo group (the pace sampler looking)",
            f"{in_group_added:+.2f} us on a {in_group:.0f} us step",
            "",
        ),
        ("hot path: counting a forward", f"{forward_added:+.2f} us", ""),
        ("hot path: counting an optimizer step", f"{optimizer_added:+.2f} us", ""),
        (
            "the two hooks' own code, called directly (forward + optimizer step)",
            f"{forward_own:.2f} + {optimizer_own:.2f} = {forward_own + optimizer_own:.2f} us",
            "<= 2 us",
        ),
    ]


def in_a_group(measure: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """``measure`` run while this process is rank 0 of a world-1 gloo group: a rank with no
    group has no collective to wait in, and the pace sampler naps instead of looking."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        return measure()
    finally:
        dist.destroy_process_group()


class Alternation:
    """Pairs of blocks of calls, one attached and one not, in alternating order and each
    after the same short pause; the result is the median difference of the pairs.

    Time is this thread's CPU time, so other processes on a shared machine do not blur
    microseconds; the agent thread's own CPU is what ``cpu`` measures.
    """

    PAUSE = 0.05
    """Lets the agent send the report it sends as it starts before timing begins."""

    def __init__(self, endpoint: str, attach: bool) -> None:
        self.endpoint = endpoint
        self.attach = attach

    def measure(self, run: Callable[[], object], model: object, blocks: int, calls: int) -> tuple[float, float]:
        """Microseconds per call without the hook, and the median added by it."""
        import distmon.hooks

        def per_call() -> float:
            time.sleep(self.PAUSE)
            start = time.thread_time()
            for _ in range(calls):
                run()
            return (time.thread_time() - start) / calls * 1e6

        def hooked() -> float:
            if self.attach:
                distmon.hooks.attach(model, endpoint=self.endpoint)
            try:
                return per_call()
            finally:
                distmon.hooks.detach()

        per_call()
        plain, added = [], []
        for block in range(blocks):
            if block % 2:
                plain.append(per_call())
                added.append(hooked() - plain[-1])
            else:
                with_hook = hooked()
                plain.append(per_call())
                added.append(with_hook - plain[-1])
        return statistics.median(plain), statistics.median(added)


def p2p_cost() -> list[tuple[str, str, str]]:
    """What tracking point-to-point traffic adds on the training thread: two gloo ranks
    exchange small tensors (isend and irecv, then both waits, as a pipeline stage does), in
    alternating blocks with and without the hook; then the two wrappers alone."""
    import torch.multiprocessing as mp

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    with tempfile.TemporaryDirectory() as directory:
        results = Path(directory) / "p2p.txt"
        mp.spawn(_p2p_rank, args=(str(results),), nprocs=2, join=True)
        op, added, wrappers, post, wait = (float(v) for v in results.read_text().split())
    per_step = 32 * added
    return [
        ("added time per p2p op (isend or irecv, and its wait)", f"{added:+.2f} us on a {op:.0f} us op", ""),
        ("the same, the p2p wrappers alone (no agent thread)", f"{wrappers:+.2f} us", ""),
        ("hot path: recording a posted op", f"{post:.2f} us", ""),
        ("hot path: marking a wait", f"{wait:.2f} us", ""),
        ("per 1F1B step of 8 microbatches (32 ops a stage)", f"{per_step:.0f} us", ""),
    ]


def _p2p_rank(rank: int, results: str) -> None:
    import torch
    import torch.distributed as dist

    import distmon.hooks
    from distmon.hooks.p2p import P2PTracker
    from distmon.wire import SEND

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    peer, sent, received = 1 - rank, torch.ones(64), torch.zeros(64)

    def exchange() -> None:
        works = [dist.isend(sent, peer), dist.irecv(received, peer)]
        for work in works:
            work.wait()

    if rank == 1:  # the partner: answers every exchange until told the count, then one all-reduce
        total = torch.zeros(1, dtype=torch.long)
        dist.recv(total, 0)
        for _ in range(int(total.item())):
            exchange()
        dist.all_reduce(torch.ones(1))
        dist.destroy_process_group()
        return
    blocks, calls = 41, 500
    timed = (1 + blocks * 4) * calls  # the warm-up, a hooked and a plain block per pair, then the wrappers
    dist.send(torch.tensor([timed]), 1)
    with monitoring() as monitor:
        _, added = Alternation(monitor.endpoint, attach=True).measure(exchange, None, blocks, calls)
    tracker = P2PTracker()
    wrapped, plain = [], []
    for _ in range(blocks):
        plain.append(_per_call(exchange, calls))
        tracker.install()
        wrapped.append(_per_call(exchange, calls))
        tracker.uninstall()
    op = statistics.median(plain)
    wrappers = statistics.median(w - p for w, p in zip(wrapped, plain, strict=True))
    group, work = dist.group.WORLD, dist.all_reduce(torch.ones(1), async_op=True)
    work.wait()  # done: waiting again returns at once (a send's work would wait for another send)
    post = _per_call(lambda: tracker._posted(group, peer, SEND, work, ([sent], peer, 0), {}), 100_000)
    plain_wait = _per_call(work.wait, 100_000)
    tracker.install()
    try:
        hooked_wait = _per_call(work.wait, 100_000)
    finally:
        tracker.uninstall()
        distmon.hooks.detach()
    Path(results).write_text(f"{op / 2} {added / 2} {wrappers / 2} {post} {hooked_wait - plain_wait}")
    dist.destroy_process_group()


def own_cost(module: Any, x: object, calls: int = 200_000) -> tuple[float, float]:
    """Microseconds the hot-path hooks' own code adds, called directly, the best of several
    runs (a busy machine only adds): the forward wrapper against the forward it wraps, and
    the optimizer-step hook against an empty call."""
    from distmon.hooks.progress import Counters, count_forwards, uncount_forwards

    progress = Counters()
    plain = module.forward
    count_forwards(module, progress)
    try:
        wrapped = module.forward
        forward = _best(lambda: wrapped(x), calls) - _best(lambda: plain(x), calls)
    finally:
        uncount_forwards(module)
    hook = progress.on_optimizer_step
    step = _best(lambda: hook(None, (), {}), calls) - _best(lambda: None, calls)
    return forward, step


def _best(run: Callable[[], object], calls: int, runs: int = 7) -> float:
    return min(_per_call(run, calls) for _ in range(runs))


def _per_call(run: Callable[[], object], calls: int) -> float:
    """Microseconds of this thread's CPU per call."""
    start = time.thread_time()
    for _ in range(calls):
        run()
    return (time.thread_time() - start) / calls * 1e6


def sampler_cpu(seconds: float = 20.0, interval: float = 1.0) -> list[tuple[str, str, str]]:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    import distmon.hooks
    from distmon.wire import PACE_SAMPLES

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
    loader = DataLoader(data, batch_size=16, num_workers=2, persistent_workers=True)
    with monitoring() as monitor:
        distmon.hooks.attach(model, endpoint=monitor.endpoint, interval=interval)
        clocks = {
            t.name: time.pthread_getcpuclockid(t.ident or 0)
            for t in threading.enumerate()
            if t.name in ("distmon-agent", "distmon-pace")
        }
        cpu_start = {name: time.clock_gettime(clock) for name, clock in clocks.items()}
        wall_start = time.monotonic()
        reports_start = monitor.reports
        while time.monotonic() - wall_start < seconds:
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if time.monotonic() - wall_start >= seconds:
                    break
        cpu = {name: time.clock_gettime(clock) - cpu_start[name] for name, clock in clocks.items()}
        wall = time.monotonic() - wall_start
        reports = monitor.reports - reports_start
        distmon.hooks.detach()
    dist.destroy_process_group()
    agent, pace = cpu["distmon-agent"], cpu["distmon-pace"]
    return [
        (
            f"sampler CPU at {1 / interval:g} Hz",
            f"{agent / wall:.2%} of a core ({agent / max(reports, 1) * 1e3:.2f} ms per report,"
            f" {reports} reports in {wall:.0f} s)",
            "<= 0.5%" if interval == 1.0 else "",
        ),
        (
            f"pace sampler CPU, {PACE_SAMPLES:g} looks a second",
            f"{pace / wall:.2%} of a core ({pace / (PACE_SAMPLES * wall) * 1e6:.0f} us a look)",
            "",
        ),
    ]


def encode_cost() -> list[tuple[str, str, str]]:
    from simulated import SimJob

    from distmon.wire import encode

    sim = SimJob(world=64).hang(3, at=10)
    rows = []
    for state, t in (("stepping", 5.0), ("stalled", 20.0)):
        report = sim.report(3, sim.start + t)
        assert report is not None
        cost = _best(partial(encode, report), 20_000)
        rows.append((f"a report encoded, {state}", f"{cost:.0f} us", ""))
    return rows


def wire_bytes(ranks: int = 4) -> list[tuple[str, str, str]]:
    from distmon.monitor.intake.receiver import Receiver
    from distmon.wire import decode

    with tempfile.TemporaryDirectory() as directory:
        endpoint = f"ipc://{directory}/bench.sock"
        receiver = Receiver(endpoint)
        env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += [f"--nproc_per_node={ranks}", str(TRAIN), "--distmon", "--steps", "150"]
        command += ["--fault", "hang", "--fault-step", "60", "--hang-seconds", "8"]
        job = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        sizes: dict[bool, list[int]] = {False: [], True: []}
        interval = 1.0
        while job.poll() is None:
            for data in (frame for batch in receiver.receive(timeout=0.2) for frame in batch.frames()):
                report = decode(data)
                interval = report.interval
                if not report.exit and report.groups:
                    sizes[report.stalled_since is not None].append(len(data))
        receiver.close()
    rows = []
    for stalled, label in ((False, "healthy"), (True, "paused, with stack")):
        if sizes[stalled]:
            mean = statistics.fmean(sizes[stalled])
            rows.append(
                (
                    f"wire bytes per rank per second, {label}",
                    f"{mean / interval:.0f} B/s ({mean:.0f} B a report, {ranks} ranks)",
                    "",
                )
            )
    return rows


def memory(runs: int = 3) -> list[tuple[str, str, str]]:
    def rss(disable: str) -> int:
        env = {**os.environ, "DISTMON_DISABLE": disable, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, __file__, "--rank-rss"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return int(done.stdout.split()[-1])

    without, with_hook = [], []
    for _ in range(runs):
        without.append(rss("1"))
        with_hook.append(rss("0"))
    base, hooked = statistics.median(without), statistics.median(with_hook)
    return [
        (
            "memory added to a rank",
            f"{(hooked - base) / MB:+.1f} MB (RSS {base / MB:.0f} MB without, {hooked / MB:.0f} MB with)",
            "<= 30 MB",
        )
    ]


def rank_rss() -> None:
    """A world-1 DDP rank with a DataLoader: trains a few seconds, then prints its RSS."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    import distmon.hooks

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    with tempfile.TemporaryDirectory() as directory:
        distmon.hooks.attach(model, endpoint=f"ipc://{directory}/nobody.sock", interval=0.2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        data = TensorDataset(torch.randn(4096, 32), torch.randn(4096, 1))
        started = time.monotonic()
        while time.monotonic() - started < 3:
            for x, y in DataLoader(data, batch_size=16, num_workers=2):
                loss = torch.nn.functional.mse_loss(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with open("/proc/self/statm") as statm:
            print(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
        distmon.hooks.detach()
    dist.destroy_process_group()


class Monitor:
    """A monitor on a private endpoint that reads and counts reports, on its own thread."""

    def __init__(self, directory: str) -> None:
        from distmon.monitor.intake.receiver import Receiver

        self._receiver = Receiver(f"ipc://{directory}/bench.sock")
        self.endpoint = self._receiver.endpoint
        self.reports = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._done.is_set():
            self.reports += sum(len(batch) for batch in self._receiver.receive(timeout=0.1))

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        self._receiver.close()


@contextmanager
def monitoring() -> Iterator[Monitor]:
    with tempfile.TemporaryDirectory() as directory:
        monitor = Monitor(directory)
        try:
            yield monitor
        finally:
            monitor.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BENCHMARKS: dict[str, Callable[[], list[tuple[str, str, str]]]] = {
    "step": step_cost,
    "p2p": p2p_cost,
    "cpu": sampler_cpu,
    "bytes": wire_bytes,
    "memory": memory,
    "encode": encode_cost,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="*", help=f"any of {', '.join(BENCHMARKS)} (all)")
    parser.add_argument("--rank-rss", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = set(args.which) - BENCHMARKS.keys()
    if unknown:
        parser.error(f"no benchmark {', '.join(sorted(unknown))}")
    if args.rank_rss:
        rank_rss()
        return
    rows = [row for name in args.which or BENCHMARKS for row in BENCHMARKS[name]()]
    print("| measure | value | goal |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
