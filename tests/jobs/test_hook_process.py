"""The hook in one process: plain scripts, attach before and after init, FSDP, no model,
detach, late and absent monitors, and how the process ends.

Each script runs in a fresh interpreter, as a user's would; the detach tests run in this
process because they inspect what attach changed and detach must restore.

Scripts wait a few intervals after attach before their last words: reports are sent
without blocking and dropped until ZeroMQ has connected, so a process that dies within
milliseconds of attach can go unheard (about 1 run in 15 on a busy machine).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

import distmon.hooks
from distmon.hooks.agent import LAST_WORDS_WAIT
from distmon.wire import Report
from distmon.wire.sockets import MONITOR_SOCKET
from tests.support.commands import free_port
from tests.support.listener import Listener

INTERVAL = 0.2
LAUNCHER_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_ID",
    "DISTMON_JOB_ID",
    "DISTMON_DISABLE",
)

PLAIN = """
import time
import torch
import distmon.hooks

model = torch.nn.Linear(8, 1)
agent = distmon.hooks.attach(model)
assert distmon.hooks.attach(model) is agent
time.sleep(3 * INTERVAL)  # until connected, see the module docstring
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(7):
    loss = model(torch.randn(4, 8)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done", flush=True)
"""

BEFORE_INIT_THEN_FSDP = """
import time
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
import distmon.hooks

distmon.hooks.attach()
time.sleep(3 * INTERVAL)
dist.init_process_group("gloo")
for _ in range(3):
    dist.all_reduce(torch.ones(2))
time.sleep(3 * INTERVAL)
model = torch.nn.Linear(8, 1)
fully_shard(model)
distmon.hooks.attach(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    loss = model(torch.randn(4, 8)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

# The hook holds models and groups weakly: dropped by the script, they are freed.
import gc, weakref
agent = distmon.hooks.attach()
short_lived = torch.nn.Linear(2, 1)
distmon.hooks.attach(short_lived)
short_lived(torch.randn(1, 2))
freed = weakref.ref(short_lived)
del short_lived
gc.collect()
assert freed() is None, "the hook kept a model alive"
group = dist.new_group([0], group_desc="short_lived")
dist.all_reduce(torch.ones(1), group=group)
assert "short_lived" in [g.desc for g in agent.sample().groups]
gone = weakref.ref(group)
dist.destroy_process_group(group)
del group
gc.collect()
assert "short_lived" not in [g.desc for g in agent.sample().groups] and gone() is None, "a destroyed group kept"
print("held weakly", flush=True)
dist.destroy_process_group()
"""

EXCEPTION = """
import time
import torch
import distmon.hooks

def load_batch():
    raise ValueError("batch 3 has 31 features, expected 32")

distmon.hooks.attach(torch.nn.Linear(8, 1))
time.sleep(3 * INTERVAL)
print("done", flush=True)
load_batch()
"""

RAISES_IN_A_THREAD = """
import sys
import threading
import time
import torch
import distmon.hooks

def load_batch():
    raise ValueError("batch 3 has 31 features, expected 32")

def train():
    model = torch.nn.Linear(8, 1)
    distmon.hooks.attach(model)
    time.sleep(3 * INTERVAL)
    model(torch.randn(4, 8)).sum().backward()
    print("done", flush=True)
    load_batch()

def log_metrics():
    raise RuntimeError("the metrics service is down")

trainer = threading.Thread(target=train, name="trainer")
trainer.start()
trainer.join()
logger = threading.Thread(target=log_metrics)
logger.start()
logger.join()
time.sleep(3 * INTERVAL)
"""
"""Training in a thread of its own, as a notebook's launcher does: its exception is the rank's;
another thread's, after it, is not."""

SLOW_TRAINING = """
import time
import torch
import distmon.hooks

model = torch.nn.Linear(8, 1)
agent = distmon.hooks.attach(model)
print("attached", flush=True)
deadline = time.monotonic() + 60
while agent.sample().n < 1 and time.monotonic() < deadline:  # a report made, with no monitor to hear it
    time.sleep(0.05)
print("reported", flush=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(150):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    time.sleep(0.02)
"""


def script_env(endpoint: str, **extra: str) -> dict[str, str]:
    """This environment without any launcher's variables, reporting to ``endpoint``."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(DISTMON_ENDPOINT=endpoint, DISTMON_INTERVAL=str(INTERVAL), **extra)
    return env


def start_script(directory: Path, source: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """Runs ``source`` as a script file, so that its frames have source lines."""
    script = directory / "script.py"
    script.write_text(f"INTERVAL = {INTERVAL}\n" + textwrap.dedent(source))
    return subprocess.Popen(
        [sys.executable, str(script)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_script(directory: Path, source: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    process = start_script(directory, source, env)
    try:
        out, err = process.communicate(timeout=180)  # a loaded host imports torch slowly: a wait, not a bound
    finally:
        process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def wait_for_exit_report(listener: Listener) -> None:
    assert listener.wait_for(lambda reports: any(r.exit for r in reports), timeout=30)


def test_plain_script_reports_steps_forwards_and_a_clean_exit(tmp_path, listener, endpoint):
    done = run_script(tmp_path, PLAIN, script_env(endpoint))
    assert done.returncode == 0, done.stderr
    wait_for_exit_report(listener)

    last = listener.snapshot()[-1]
    assert (last.rank, last.world, last.local_rank, last.backend) == (0, 1, 0, None)
    assert last.job == f"{socket.gethostname()}:{last.pid}"
    assert (last.steps, last.forwards) == (7, 7), "attaching twice must not count twice"
    assert last.exit is not None and last.exit.how == "clean"
    assert last.exception is None
    assert last.groups == [] and last.loaders == []
    assert last.memory is not None and last.memory.rss > 0
    assert last.gpu is None


def test_attach_before_init_then_fsdp_module_and_nothing_held_strongly(tmp_path, listener, endpoint):
    port = free_port()
    env = script_env(endpoint, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update(RANK="0", WORLD_SIZE="1")
    done = run_script(tmp_path, BEFORE_INIT_THEN_FSDP, env)
    assert done.returncode == 0, done.stderr
    assert "held weakly" in done.stdout
    wait_for_exit_report(listener)

    reports = listener.snapshot()
    before_init = [r for r in reports if r.backend is None and not r.exit]
    assert before_init and all(r.groups == [] for r in before_init)
    after_reduces = [r for r in reports if r.backend == "gloo" and r.steps == 0]
    assert after_reduces
    (world,) = after_reduces[-1].groups
    assert (world.size, world.ranks, world.completed) == (1, [[0, 1, 1]], 3)
    last = reports[-1]
    assert last.job == f"127.0.0.1:{port}"
    assert (last.steps, last.forwards) == (4, 5), "four training steps, and the short-lived model once"
    assert last.exit is not None and last.exit.how == "clean"


def test_the_training_threads_exception_is_the_ranks_and_another_threads_is_not(tmp_path, listener, endpoint):
    done = run_script(tmp_path, RAISES_IN_A_THREAD, script_env(endpoint))
    assert "ValueError: batch 3 has 31 features, expected 32" in done.stderr, "still printed"
    assert "RuntimeError: the metrics service is down" in done.stderr
    wait_for_exit_report(listener)
    last = listener.snapshot()[-1]
    assert last.exception is not None and last.exception.type == "ValueError", last.exception
    assert last.exception.where is not None and last.exception.where.func == "load_batch"
    assert [f.func for f in last.exception.traceback[-2:]] == ["train", "load_batch"]
    assert last.exit is not None and last.exit.how == "exception", last.exit


def test_uncaught_exception_is_reported_and_still_printed(tmp_path, listener, endpoint):
    done = run_script(tmp_path, EXCEPTION, script_env(endpoint))
    assert done.returncode == 1
    assert "ValueError: batch 3 has 31 features, expected 32" in done.stderr
    wait_for_exit_report(listener)

    last = listener.snapshot()[-1]
    assert last.exit is not None and last.exit.how == "exception"
    assert last.exception is not None
    assert last.exception.type == "ValueError"
    assert last.exception.message == "batch 3 has 31 features, expected 32"
    assert last.exception.where is not None and last.exception.where.func == "load_batch"
    assert last.exception.traceback[-1] == last.exception.where


def test_stalled_process_reports_its_main_thread_stack(tmp_path, listener, endpoint):
    stalling = """
    import time
    import distmon.hooks

    def wait_for_checkpoint():
        time.sleep(600)

    distmon.hooks.attach()
    wait_for_checkpoint()
    """
    process = start_script(tmp_path, stalling, script_env(endpoint))
    try:
        stalled = listener.wait_for(lambda reports: any(r.stack for r in reports), timeout=120)
    finally:
        process.kill()
        process.wait()
    assert stalled
    report = next(r for r in listener.snapshot() if r.stack)
    assert report.stalled_since is not None and report.stalled_since < report.t
    assert report.stack[-1].func == "wait_for_checkpoint"
    assert report.stack[-1].code == "time.sleep(600)"


IN_A_THREAD = """
import sys
import threading
import time
import torch
import distmon.hooks

def train():
    model = torch.nn.Linear(8, 1)
    distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    wait_for_checkpoint()

def wait_for_checkpoint():
    return sys.stdin.readline()  # until the test has seen the stall: a loaded machine takes its time

thread = threading.Thread(target=train, name="TrainingThread(train)")
thread.start()
thread.join()
print("done", flush=True)
time.sleep(30)  # the launcher kills the process after the training function returned
"""


def test_a_rank_training_in_a_thread_reports_that_thread_and_says_goodbye_when_it_returns(tmp_path, listener, endpoint):
    def waiting(report: Report) -> bool:  # not the first optimizer step's imports, a stall too under load
        return bool(report.stack) and report.stack[-1].func == "wait_for_checkpoint"

    process = start_script(tmp_path, IN_A_THREAD, script_env(endpoint))
    try:
        assert listener.wait_for(lambda reports: any(waiting(r) for r in reports), timeout=60)
        assert process.stdin is not None
        process.stdin.close()
        assert listener.wait_for(lambda reports: any(r.exit for r in reports), timeout=30)
    finally:
        process.kill()
        process.wait()
    reports = listener.snapshot()
    stalled = next(r for r in reports if waiting(r))
    assert stalled.stack[-1].code.startswith("return sys.stdin.readline()")
    assert [f.func for f in stalled.stack[-2:]] == ["train", "wait_for_checkpoint"]
    assert stalled.tid is not None and stalled.tid != stalled.pid
    assert stalled.thread is not None
    last = reports[-1]
    assert last.exit is not None and last.exit.how == "finished"
    assert process.returncode == -signal.SIGKILL  # the goodbye came while the process was there


def test_late_monitor_gets_fresh_reports_within_an_interval(tmp_path, endpoint):
    process = start_script(tmp_path, SLOW_TRAINING, script_env(endpoint))
    try:
        assert process.stdout is not None and process.stdout.readline() == "attached\n"
        assert process.stdout.readline() == "reported\n"  # its agent has made a report, for no one
        bound_at = time.time()
        with Listener(endpoint) as listener:
            seen = listener.wait_for(lambda reports: reports, timeout=25 * INTERVAL)
            listener.wait_for(lambda reports: len(reports) >= 3, timeout=50 * INTERVAL)
            reports = listener.snapshot()
    finally:
        process.kill()
        process.wait()
    assert seen, "a monitor that starts late hears from the rank within an interval or so"
    # Before the monitor, the rank has made a report or more: none of them was kept for the monitor.
    assert reports[0].n >= 1, "reports from before the monitor existed"
    assert all(r.t > bound_at - INTERVAL for r in reports), "nothing stale was queued"
    assert [r.n for r in reports] == list(range(reports[0].n, reports[0].n + len(reports)))


WAITING = """
import time
import torch
import distmon.hooks

distmon.hooks.attach(torch.nn.Linear(8, 1))
print("attached", flush=True)
time.sleep(120)
"""


def test_a_monitor_started_after_the_rank_hears_from_it_at_once_not_an_interval_later(tmp_path, endpoint):
    """The rank's first report, made at attach, found no monitor: the next goes the moment one
    connects, not a minute later at the rank's next interval."""
    env = script_env(endpoint)
    env["DISTMON_INTERVAL"] = "60"
    process = start_script(tmp_path, WAITING, env)
    try:
        assert process.stdout is not None and process.stdout.readline() == "attached\n"
        time.sleep(1)  # the scenario: no monitor for longer than the report's wait to connect
        with Listener(endpoint) as listener:
            assert listener.wait_for(lambda reports: reports, timeout=30), "not heard before the next interval"
            first = listener.snapshot()[0]
    finally:
        process.kill()
        process.wait()
    assert first.n >= 1 and first.exit is None  # not the report made at attach, nor last words


def seconds_to_exit(directory: Path, source: str, env: dict[str, str]) -> float:
    """From the script's last line to the end of its process; fails on a wrong exit code."""
    process = start_script(directory, source, env)
    try:
        assert process.stdout is not None and process.stdout.readline() == "done\n"
        ended_at = time.monotonic()
        process.wait(timeout=30)
        seconds = time.monotonic() - ended_at
    finally:
        process.kill()
    expected = 1 if source == EXCEPTION else 0
    assert process.returncode == expected, process.stderr and process.stderr.read()
    return seconds


@pytest.fixture
def stuck_monitor(endpoint: str) -> Iterator[str]:
    """A monitor that binds the endpoint but never reads."""
    context = zmq.Context()
    sock = context.socket(MONITOR_SOCKET)
    sock.setsockopt(zmq.RCVHWM, 1)
    sock.bind(endpoint)
    yield endpoint
    sock.close(linger=0)
    context.term()


ENDPOINTS = {
    "no monitor": lambda request: request.getfixturevalue("endpoint"),
    "stuck monitor": lambda request: request.getfixturevalue("stuck_monitor"),
    "unresolvable host": lambda request: "tcp://no-such-host.invalid:5555",
}


@pytest.mark.parametrize("ending", ["clean", "exception"])
@pytest.mark.parametrize("monitor", list(ENDPOINTS))
def test_process_exits_promptly_after_the_script_ends(tmp_path, request, ending, monitor):
    """A bound, not a speed: a forgotten ZeroMQ linger, a non-daemon thread or a flush
    waiting for a monitor that never reads would hold the process here for ever (until the
    30 s wait). The bound leaves room for torch's own teardown, as long with the hook as
    without it, on a machine loaded with the whole suite (a 15 s bound was passed by 0.7 s once,
    the endpoint's host unresolvable, the suite's load beside it)."""
    endpoint = ENDPOINTS[monitor](request)
    source = PLAIN if ending == "clean" else EXCEPTION
    seconds = seconds_to_exit(tmp_path, source, script_env(endpoint))
    assert seconds < 20, f"the process outlived its script by {seconds:.2f} s"


def test_disabled_hook_does_nothing(monkeypatch):
    monkeypatch.setenv("DISTMON_DISABLE", "1")
    assert distmon.hooks.attach() is None
    assert not [t for t in threading.enumerate() if t.name == "distmon-agent"]


def p2p_methods(c10d):
    """The methods the hook wraps to follow point-to-point traffic, and their classes."""
    group = c10d.ProcessGroup
    return [(group, "send"), (group, "recv"), (group, "recv_anysource"), (c10d.Work, "wait")]


def test_detach_stops_the_agent_and_undoes_every_hook(listener, endpoint):
    import torch
    from torch._C import _distributed_c10d as c10d
    from torch.utils.data import dataloader

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    excepthook = sys.excepthook
    loader_next = dataloader._BaseDataLoaderIter.__next__
    p2p = {(cls, name): vars(cls)[name] for cls, name in p2p_methods(c10d)}

    def step() -> None:
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()

    agent = distmon.hooks.attach(model, endpoint=endpoint, interval=INTERVAL)
    try:
        assert agent is not None
        step()
        assert listener.wait_for(lambda reports: any(r.steps == 1 for r in reports), timeout=30)
    finally:
        distmon.hooks.detach()
    detached_at = time.time()
    distmon.hooks.detach()

    step()
    assert (agent.progress.steps, agent.progress.forwards) == (1, 1)
    assert "forward" not in model.__dict__
    assert sys.excepthook is excepthook
    assert dataloader._BaseDataLoaderIter.__next__ is loader_next
    assert {(cls, name): vars(cls)[name] for cls, name in p2p_methods(c10d)} == p2p, "bound as before, self and all"
    assert not [t for t in threading.enumerate() if t.name == "distmon-agent"]
    time.sleep(3 * INTERVAL)  # a report sent before detach may still be on its way; none after
    assert all(r.t <= detached_at for r in listener.snapshot()), "reports after detach"
    assert listener.snapshot()[-1].exit is None


def test_last_words_do_not_wait_for_an_agent_that_has_ended(capfd):
    agent = distmon.hooks.attach(endpoint="no-such-transport://x", interval=INTERVAL)
    try:
        assert agent is not None
        while [t for t in threading.enumerate() if t.name == "distmon-agent"]:
            time.sleep(0.01)
        started = time.monotonic()
        sys.excepthook(ValueError, ValueError("lost batch"), None)
        seconds = time.monotonic() - started
    finally:
        distmon.hooks.detach()
    assert "ValueError: lost batch" in capfd.readouterr().err
    # waiting for the agent's last report would hold it LAST_WORDS_WAIT (2 s) or more
    assert seconds < 0.8 * LAST_WORDS_WAIT, f"the excepthook held the rank {seconds:.2f} s"


def test_attach_with_a_bad_endpoint_never_raises_and_says_so(capfd):
    import torch

    model = torch.nn.Linear(4, 1)
    try:
        agent = distmon.hooks.attach(model, endpoint="no-such-transport://x", interval=INTERVAL)
        model(torch.randn(2, 4))
    finally:
        distmon.hooks.detach()
    assert agent is not None
    assert agent.progress.forwards == 1
    err = capfd.readouterr().err
    assert err.startswith("distmon: not monitoring this rank: cannot connect to no-such-transport://x")
    assert len(err.splitlines()) == 1


SIGTERM_TARGET = """
import signal
import time
import sys
import distmon.hooks

distmon.hooks.attach()
if sys.argv[1:] == ["own-handler"]:
    signal.signal(signal.SIGTERM, lambda *_: print("own handler", flush=True))
print("attached", flush=True)
sys.stdin.readline()  # until the test has had its say: a loaded machine takes its time
print("survived", flush=True)
"""


def test_sigterm_sends_last_words_then_kills_as_before(tmp_path, listener):
    process = start_script(tmp_path, SIGTERM_TARGET, script_env(listener.endpoint))
    assert process.stdout is not None and process.stdout.readline() == "attached\n"
    time.sleep(2 * INTERVAL)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == -signal.SIGTERM, "the process dies of SIGTERM, as without the hook"
    assert listener.wait_for(lambda reports: reports and reports[-1].exit is not None, timeout=30)
    assert listener.snapshot()[-1].exit.how == "terminated"


SIGTERM_AS_THE_LAST_WORDS_LEAVE = """
import atexit
import os
import signal

import zmq

import distmon.hooks

distmon.hooks.attach()


def teardown_as_the_last_words_leave():
    \"\"\"Runs before the hook's exit handler (registered earlier): SIGTERM comes as the hook
    sends its last report, as torchrun's teardown of the others reaches a rank whose last words
    are on their way out.\"\"\"
    send = zmq.Socket.send

    def sigterm_then_send(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return send(self, *args, **kwargs)

    zmq.Socket.send = sigterm_then_send


atexit.register(teardown_as_the_last_words_leave)
raise ValueError("the rank's own error")
"""


def test_a_sigterm_while_the_last_words_leave_waits_for_them_then_kills(tmp_path, listener):
    """A rank raised and is leaving; the launcher, tearing the others down, sends it SIGTERM as
    its last report is queued: the report still leaves (a fresh-clone run named such a rank
    killed beside the one that was)."""
    done = run_script(tmp_path, SIGTERM_AS_THE_LAST_WORDS_LEAVE, script_env(listener.endpoint))
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    assert "ValueError: the rank's own error" in done.stderr
    assert listener.wait_for(lambda reports: any(r.exit is not None for r in reports), timeout=30)
    last = listener.snapshot()[-1]
    assert last.exit is not None and last.exception is not None and last.exception.type == "ValueError"


def test_a_sigterm_handler_installed_later_keeps_its_say(tmp_path, endpoint):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SIGTERM_TARGET))
    process = subprocess.Popen(
        [sys.executable, str(script), "own-handler"],
        env=script_env(endpoint),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        assert process.stdout.readline() == "attached\n"
        process.send_signal(signal.SIGTERM)
        assert process.stdout.readline() == "own handler\n"
        process.stdin.close()
        assert process.wait(timeout=60) == 0
        assert process.stdout.read() == "survived\n"
    finally:
        process.kill()
