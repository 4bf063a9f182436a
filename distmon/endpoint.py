"""Where ranks and the monitor meet. Ranks connect; the monitor binds."""

from __future__ import annotations

import ipaddress
import os
import tempfile

ENV = "DISTMON_ENDPOINT"


def default_endpoint() -> str:
    """An ipc socket private to this user on this host, so a single-node job and a monitor
    started on the same host find each other without configuration."""
    return f"ipc://{tempfile.gettempdir()}/distmon-{os.getuid()}.sock"


def resolve(explicit: str | None = None) -> str:
    return explicit or os.environ.get(ENV) or default_endpoint()


def bind_address(endpoint: str) -> str:
    """The address the monitor binds for the endpoint that ranks connect to.

    ``tcp://monitor-host:PORT`` names the monitor as the ranks see it; ZeroMQ cannot bind
    a host name, so the monitor binds that port on all interfaces. Loopback and IP
    addresses are bound as given.
    """
    if not endpoint.startswith("tcp://"):
        return endpoint
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    if host == "localhost":
        return f"tcp://127.0.0.1:{port}"
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"tcp://*:{port}" if host != "*" else endpoint
    return endpoint
