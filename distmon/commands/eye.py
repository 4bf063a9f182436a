"""``distmon eye``: a node's eye, as ``distmon look``, ``watch --find`` and ``record --find``
start it on each node of a job they reach (over ssh, or as a step of the job's Slurm
allocation); not a command a person types.

It reads one line on its standard input, JSON: the job key the head made for this look, the
port where the head listens, the job to follow where the head knows it, the head's distmon
version, and the head's address where the head names it (else the address this node's ssh
connection or Slurm step came from). It answers on its standard output with one line, JSON:
this node's host name, its distmon version, its Python, whether py-spy is there, the jobs it
found and the other hosts each runs on as this node can tell. Then it is a relay that finds
the node's ranks (:mod:`distmon.node.found_ranks`) and reports for them to the head over TCP
with the key, until its standard input closes (the head ended, or its ssh or srun did), SIGINT,
SIGTERM or SIGHUP, or the head has been gone :data:`LIFELINE` seconds (a head killed, its srun with
it, leaves its steps' tasks running: they end themselves). Nothing it starts outlives it.

A node that runs another version of distmon says so and ends: the head tells the user.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import sys
import tempfile
import threading
import time

import distmon
from distmon import keys
from distmon.commands.shared.signals import stop_on_signals

LIFELINE = 10.0
"""Seconds the head may be gone (never reached, or lost) before the eye ends, unless its orders
say (between 1 and :data:`MAX_LIFELINE`)."""
MAX_LIFELINE = 300.0
FIRST_LINE = 30.0
"""Seconds to wait for the head's line on standard input."""
FIRST_SCAN = 10.0
"""Seconds to wait for the first scan of this node before answering."""
MAX_LINE = 1 << 16
OTHER_VERSION = 3
"""Exit code of an eye whose version is not the head's."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "a node's eye, as distmon look, watch --find and record --find start it on each node they reach "
        "(its orders come on standard input; not a command to type)"
    )


def run(args: argparse.Namespace) -> int:
    from distmon.node.eye import NodeEye
    from distmon.node.jobhosts import own_addresses
    from distmon.node.pyspy import executable
    from distmon.node.relay import NodeRelay

    stop = stop_on_signals()
    orders = _orders()
    if orders is None:
        print("distmon eye: no orders on standard input (distmon look starts this command)", file=sys.stderr)
        return 2
    host = socket.gethostname()
    said: dict[str, object] = {"host": host, "version": distmon.__version__, "python": sys.executable}
    if orders.get("version") != distmon.__version__:
        _say({**said, "refused": "other_version"})
        return OTHER_VERSION
    try:
        key = _key(orders["key"])
        port = orders["port"]
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"no port: {port!r}")
        upstream = f"tcp://{_bracketed(_head(orders))}:{port}"
    except (KeyError, TypeError, ValueError, keys.KeyFileError) as e:
        _say({**said, "refused": f"bad orders: {e}"})
        return 2
    job = orders.get("job")
    job = job if isinstance(job, str) else None
    eye = NodeEye(find=True, job=job)
    folder = tempfile.mkdtemp(prefix="distmon-eye-")
    try:
        relay = NodeRelay(f"ipc://{folder}/ranks.sock", upstream, key, eye=eye, lifeline=_lifeline(orders))
    except Exception as e:  # an address the head gave that this node cannot use
        eye.close()
        _say({**said, "refused": f"cannot reach the head at {upstream}: {e}"})
        return 2
    try:
        found = eye.found
        assert found is not None
        began = time.monotonic()
        while found.scans == 0 and time.monotonic() - began < FIRST_SCAN:
            time.sleep(0.05)
        jobs = {
            name: {
                "ranks": sorted(r.rank for r in ranks if r.rank is not None),
                "world": max((r.world for r in ranks), default=0),
                "hosts": found.hosts_of(name),
            }
            for name, ranks in found.found.jobs.items()
            if job is None or name == job
        }
        addresses = sorted(own_addresses())
        _say(
            {
                **said,
                "pyspy": executable() is not None,
                "jobs": jobs,
                "hidden": found.found.hidden,
                "addresses": addresses,
            }
        )
        closed = _watch_input()
        relay.run(lambda: bool(stop) or closed.is_set())
    finally:
        relay.close()
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    return 0


def _orders() -> dict[str, object] | None:
    """The head's line, or None where none came within :data:`FIRST_LINE` seconds."""
    ready, _, _ = select.select([sys.stdin], [], [], FIRST_LINE)
    if not ready:
        return None
    line = sys.stdin.buffer.readline(MAX_LINE)
    try:
        orders = json.loads(line)
    except ValueError:
        return None
    return orders if isinstance(orders, dict) else None


def _lifeline(orders: dict[str, object]) -> float:
    given = orders.get("lifeline")
    return min(max(float(given), 1.0), MAX_LIFELINE) if isinstance(given, int | float) else LIFELINE


def _key(content: object) -> keys.JobKey:
    """The job key as the head sent it (a key file's content)."""
    if not isinstance(content, dict):
        raise ValueError("no key")
    return keys.key_from(content, "the head's key")


def _head(orders: dict[str, object]) -> str:
    """The head's address: as the head named it, else where this node's ssh connection or
    Slurm step came from."""
    named = orders.get("head")
    if isinstance(named, str) and named:
        return named
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    if ssh:
        return ssh[0]
    launched = os.environ.get("SLURM_LAUNCH_NODE_IPADDR", "")
    if launched:
        return launched
    raise ValueError("the head's address is unknown (no SSH_CONNECTION, no SLURM_LAUNCH_NODE_IPADDR)")


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _say(answer: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def _watch_input() -> threading.Event:
    """An event set once standard input closes: the head ended, or its ssh or srun did."""
    closed = threading.Event()

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            while os.read(sys.stdin.fileno(), MAX_LINE):
                pass
        closed.set()

    threading.Thread(target=read, name="distmon-eye-input", daemon=True).start()
    return closed
