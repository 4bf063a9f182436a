"""``distmon run``: run an unmodified training command with every rank monitored.

    distmon run --record run.distmon -- torchrun --nproc-per-node=4 train.py
    distmon run --watch [--record run.distmon] -- torchrun --nproc-per-node=4 train.py
    distmon run --relay tcp://head:5555 -- torchrun --nnodes=2 --nproc-per-node=4 ... train.py

The ranks get the hook through a ``sitecustomize`` put on their path (see
:mod:`distmon.launch`) and report to a private endpoint, where a recorder (``--record``) or
the terminal UI (``--watch``) listens. Signals reach the job, the recording is closed after
the job's last words are in, and the job's exit status is distmon's; when distmon ended a
hung job (``--abort-on-hang``) it is never 0. With ``--record FILE``, critical alerts'
evidence is kept beside it (``FILE`` without its extension, plus ``.evidence``) unless
``--evidence`` says where.

On a job of several nodes, ``--relay UPSTREAM`` gives this node's ranks a relay of their own
(:mod:`distmon.node.relay`) on a private socket, forwarding to the monitor at ``UPSTREAM``: run
it so on every node, and the monitor holds one connection per node. On the node that also
runs the monitor, ``--record`` or ``--watch`` with ``--endpoint`` (where every node's relay
connects) runs both. The relay is started before the job and stopped after the ranks' last
words are in, sending what it holds as it stops.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from distmon import endpoint, keys
from distmon.commands.shared import acting, metrics_port
from distmon.commands.shared.live import add_monitor_arguments as add_monitor_arguments
from distmon.commands.shared.live import forward_monitor
from distmon.doctor.launch_command import PER_RANK, parse_launch
from distmon.launch import job_environment
from distmon.launch.supervisor import Job
from distmon.node.pyspy import TRACER_ENV

LISTEN_WAIT = 15.0
"""Seconds the monitor gets to start listening before the job starts without waiting for it."""
RELAY_LAST_WORDS = 0.3
"""Seconds the relay keeps listening after the job ends, for the last words already on their
way (a rank's socket lingers until they are sent): it then sends all it holds, and stops."""
LAST_WORDS = 1.5
"""Seconds the recorder keeps listening after the job ends: ranks report their exit as they
die, and the detector needs a tick to turn a last report into an alert."""
CLOSE_WAIT = 10.0
"""Seconds the recorder gets to close its file once asked."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--watch", action="store_true", help="show the live terminal UI; the job's output goes to --log"
    )
    parser.add_argument("--record", metavar="FILE", help="record the job to FILE (alone: print alerts on stderr)")
    parser.add_argument(
        "--endpoint",
        help="where the ranks report (default: a private socket with --watch or --record, else $DISTMON_ENDPOINT)",
    )
    parser.add_argument(
        "--relay",
        metavar="UPSTREAM",
        help="this node's ranks report through a relay of their own, which forwards to UPSTREAM "
        "(the monitor's --endpoint; on a job of several nodes, run distmon run --relay on each)",
    )
    parser.add_argument("--log", metavar="FILE", help="with --watch, the file for the job's output")
    metrics_port.add_metrics_port_argument(parser)
    keys.add_key_file_argument(parser)
    acting.add_acting_arguments(parser)
    add_monitor_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the training command, after --")


def run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        return _usage("give the command to run after --, e.g. distmon run --record run.distmon -- torchrun train.py")
    if args.log and not args.watch:
        return _usage("--log goes with --watch (without it the job's output stays on this terminal)")
    if args.metrics_port is not None and not (args.watch or args.record):
        return _usage("--metrics-port goes with --watch or --record (the monitor serves the metrics)")
    problem = metrics_port.metrics_port_problem(args)
    if problem:
        return _usage(problem)
    if acting.acting_wanted(args) and not (args.watch or args.record):
        return _usage(
            "--evidence, --notify, --on-alert and --abort-on-hang go with --watch or --record (the monitor acts)"
        )
    if args.relay and args.endpoint and not (args.watch or args.record):
        return _usage("with --relay the ranks report to the relay; --endpoint is for a monitor (--watch, --record)")
    if args.relay and (args.watch or args.record) and not args.endpoint:
        return _usage("--relay with --watch or --record needs --endpoint: where the monitor hears every node's relay")
    if args.record and args.evidence is None:
        args.evidence = default_evidence(args.record)
    key_file = keys.resolve_key_file(args.key_file)
    if key_file is not None:
        try:
            keys.load_key(key_file)
        except keys.KeyFileError as e:
            return _usage(str(e))
        key_file = os.path.abspath(key_file)
    with tempfile.TemporaryDirectory(prefix="distmon-run-") as private:
        monitored = args.watch or args.record
        job_endpoint = args.endpoint or (f"ipc://{private}/ranks.sock" if monitored else endpoint.resolve())
        problem = acting.acting_problem(args, job_endpoint, key_file is not None)
        if problem:
            return _usage(problem)
        keyed = ["--key-file", key_file] if key_file else []
        relay = None
        if args.relay:
            relay = LocalRelay(f"ipc://{private}/relay.sock", args.relay, keyed)
        note = _remote_ranks_note(command, relay.listen if relay else job_endpoint)
        if note:
            print(f"distmon run: {note}", file=sys.stderr)
        env = job_environment(relay.listen if relay else job_endpoint, os.environ)
        if key_file:
            env[keys.ENV] = key_file
        if args.watch:
            recorded = ["--record", args.record] if args.record else []
            watch = [
                "watch",
                *recorded,
                *metrics_port.forward_metrics_port(args),
                *keyed,
                *acting.forward_acting(args),
                *forward_monitor(args),
            ]
            return _run_watched(command, env, job_endpoint, args.log or _default_log(), watch, relay)
        if args.record:
            record = [
                "record",
                "--out",
                args.record,
                *metrics_port.forward_metrics_port(args),
                *keyed,
                *acting.forward_acting(args),
            ]
            record += forward_monitor(args)
            return _run_recorded(command, env, job_endpoint, record, relay)
        return _run_job(Job(command, env), relay)


def _remote_ranks_note(command: list[str], ranks_endpoint: str) -> str | None:
    """What a launcher that may start ranks on other nodes (``srun``, ``mpirun``) means for an
    endpoint on this node only, said before the job starts rather than left to silence."""
    launcher = parse_launch(command).launcher
    if launcher not in PER_RANK or not ranks_endpoint.startswith("ipc://"):
        return None
    forwarded = ""
    if launcher != "srun":
        forwarded = f"; {launcher} passes PYTHONPATH and DISTMON_ENDPOINT to other nodes only when told (-x NAME)"
    return (
        f"{launcher} starts the ranks; those on this node report to {ranks_endpoint}, those on other nodes cannot "
        f"reach it: for a job of several nodes give --endpoint tcp://{socket.gethostname()}:PORT with --record or "
        f"--watch{forwarded}"
    )


def default_evidence(recording: str) -> str:
    """``runs/job.distmon`` keeps its evidence in ``runs/job.evidence``."""
    return os.path.splitext(recording)[0] + ".evidence"


@dataclass
class LocalRelay:
    """This node's relay (``--relay``): listening for the ranks on ``listen``, forwarding to
    ``upstream``."""

    listen: str
    upstream: str
    keyed: list[str]

    def command(self) -> list[str]:
        relay = ["relay", "--listen", self.listen, "--upstream", self.upstream, *self.keyed]
        return [sys.executable, "-m", "distmon", *relay]


def _run_recorded(
    command: list[str], env: dict[str, str], job_endpoint: str, record: list[str], relay: LocalRelay | None
) -> int:
    recorder_command = [sys.executable, "-m", "distmon", *record]
    # A session of its own: Ctrl-C on the terminal is for the job; the recorder is stopped
    # after the job has ended, so that it records how the job ended.
    with _monitor(recorder_command, job_endpoint, new_session=True) as recorder:
        if recorder.poll() is not None:
            return recorder.returncode or 1
        status = _run_job(Job(command, {**env, TRACER_ENV: str(recorder.pid)}), relay)
        if recorder.poll() is None:
            time.sleep(LAST_WORDS)
        elif recorder.returncode != acting.ENDED_JOB:
            print(f"distmon: the recorder stopped early (status {recorder.returncode})", file=sys.stderr)
    return _final_status(status, recorder.returncode)


def _run_watched(
    command: list[str],
    env: dict[str, str],
    job_endpoint: str,
    log_path: str,
    watch: list[str],
    relay: LocalRelay | None,
) -> int:
    try:
        log = open(log_path, "wb")  # noqa: SIM115 -- closed below, after the job
    except OSError as e:
        return _usage(f"cannot write the log {log_path}: {e.strerror}")
    print(f"distmon: the job's output goes to {log_path}", file=sys.stderr)
    watch_command = [sys.executable, "-m", "distmon", *watch]
    with log, _monitor(watch_command, job_endpoint, new_session=False) as ui:
        if ui.poll() is not None:
            return ui.returncode or 1
        job = Job(command, {**env, TRACER_ENV: str(ui.pid)}, stdin=subprocess.DEVNULL, stdout=log, terminal=False)
        threading.Thread(target=_say_if_ui_closes, args=(ui, job, log_path), daemon=True).start()
        status = _run_job(job, relay)
        if ui.poll() is None:
            ui.wait()
        print(f"distmon: the job exited with status {status}; its output is in {log_path}", file=sys.stderr)
    return _final_status(status, ui.returncode)


def _final_status(job_status: int, monitor_status: int | None) -> int:
    """The job's own status; never 0 when distmon ended it, even if the launcher then
    restarted it and it finished: a scheduler must know that the run was cut short."""
    if monitor_status != acting.ENDED_JOB:
        return job_status
    print(
        f"distmon run: distmon ended the job (--abort-on-hang); the job's status was {job_status}",
        file=sys.stderr,
    )
    return job_status or acting.ENDED_JOB


def _run_job(job: Job, relay: LocalRelay | None = None) -> int:
    """Run the job, through this node's relay if there is one: the relay is listening before
    the job starts, and stops once the ranks' last words are in."""
    if relay is None:
        return _run_job_alone(job)
    with _monitor(relay.command(), relay.listen, new_session=True) as process:
        if process.poll() is not None:
            print(f"distmon run: the relay did not start (status {process.returncode})", file=sys.stderr)
            return process.returncode or 1
        status = _run_job_alone(job)
        time.sleep(RELAY_LAST_WORDS)
    return status


def _run_job_alone(job: Job) -> int:
    try:
        return job.run()
    except OSError as e:
        print(f"distmon run: cannot run {job.argv[0]}: {e.strerror}", file=sys.stderr)
        return 127 if e.errno == errno.ENOENT else 126


@contextlib.contextmanager
def _monitor(command: list[str], job_endpoint: str, *, new_session: bool) -> Iterator[subprocess.Popen[bytes]]:
    """A monitor (or relay) process listening on the job's endpoint; stopped (cleanly) on the
    way out."""
    process = subprocess.Popen(command, env={**os.environ, endpoint.ENV: job_endpoint}, start_new_session=new_session)
    try:
        _wait_listening(process, job_endpoint)
        yield process
    finally:
        _stop(process)


def _wait_listening(process: subprocess.Popen[bytes], job_endpoint: str) -> None:
    deadline = time.monotonic() + LISTEN_WAIT
    while process.poll() is None and not _listening(job_endpoint):
        if time.monotonic() > deadline:
            print(f"distmon: the monitor is not listening on {job_endpoint} yet; starting the job", file=sys.stderr)
            return
        time.sleep(0.05)


def _listening(job_endpoint: str) -> bool:
    if job_endpoint.startswith("ipc://"):
        return os.path.exists(job_endpoint[len("ipc://") :])
    if job_endpoint.startswith("tcp://"):
        host, _, port = endpoint.bind_address(job_endpoint)[len("tcp://") :].rpartition(":")
        with contextlib.suppress(OSError, ValueError):
            socket.create_connection(("127.0.0.1" if host == "*" else host.strip("[]"), int(port)), 0.2).close()
            return True
        return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(CLOSE_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        print("distmon: the monitor did not stop when asked and was killed", file=sys.stderr)


def _say_if_ui_closes(ui: subprocess.Popen[bytes], job: Job, log_path: str) -> None:
    ui.wait()
    if job.running:
        print(
            f"distmon: the monitor closed; the job goes on (output in {log_path}); Ctrl-C stops it",
            file=sys.stderr,
        )


def _default_log() -> str:
    return time.strftime("distmon-run-%Y%m%d-%H%M%S.log")


def _usage(message: str) -> int:
    print(f"distmon run: {message}", file=sys.stderr)
    return 2
