"""Where the ranks meet: the rendezvous address (MASTER_ADDR / MASTER_PORT, or torchrun's
``--rdzv-endpoint``), whether it resolves, whether this node hosts it, and the port."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket

from distmon.doctor.results import Check, failed, passed, warned

CONNECT_TIMEOUT = 3.0
DEFAULT_PORT = 29500
SLURM_HEAD = 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'


def rendezvous_checks(addr: str, port: str, nnodes: int, is_master: bool | None) -> list[Check]:
    """``is_master``: whether this node hosts the store (node rank 0); None to tell by address."""
    try:
        port_number = int(port)
        if not 0 < port_number < 65536:
            raise ValueError
    except ValueError:
        return [
            failed("master_port", f"MASTER_PORT={port!r} is not a port number", "a free port 1024-65535, e.g. 29500")
        ]
    try:
        addresses = sorted({str(info[4][0]) for info in socket.getaddrinfo(addr, port_number, type=socket.SOCK_STREAM)})
    except (socket.gaierror, UnicodeError) as e:
        return [
            failed(
                "master_addr",
                f"MASTER_ADDR={addr} does not resolve: {getattr(e, 'strerror', e)}",
                f"the first node's host name or IP as the other nodes see it (SLURM: {SLURM_HEAD})",
            )
        ]
    shown = ", ".join(addresses)
    checks = []
    if nnodes > 1 and all(ipaddress.ip_address(a).is_loopback for a in addresses):
        checks.append(
            failed(
                "master_addr",
                f"MASTER_ADDR={addr} is loopback ({shown}) but the job spans {nnodes} nodes",
                f"the first node's host name or IP as the other nodes see it (SLURM: {SLURM_HEAD})",
            )
        )
    else:
        checks.append(passed("master_addr", f"MASTER_ADDR={addr} resolves to {shown}"))
    local = is_master if is_master is not None else any(_is_local(a) for a in addresses)
    checks.append(_port_free(port_number) if local else _port_answers(addr, port_number))
    return checks


def _port_free(port: int) -> Check:
    """On the node that hosts the store: the port must be free for it to listen on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                return failed(
                    "master_port", f"cannot listen on port {port}: {e.strerror}", "choose a port of 1024 or more"
                )
            return failed(
                "master_port",
                f"port {port} on this node is already in use{_owner(port)}: the store cannot listen",
                f"stop what holds it (an earlier job?), or use a free port such as {_free_port()} "
                "(MASTER_PORT, or torchrun --master-port)",
            )
    return passed("master_port", f"this node hosts the rendezvous and port {port} is free")


def _port_answers(addr: str, port: int) -> Check:
    """On another node: the master's port must be reachable (once the master has started)."""
    try:
        socket.create_connection((addr, port), CONNECT_TIMEOUT).close()
    except ConnectionRefusedError:
        return warned(
            "master_port",
            f"{addr} answers, but nothing listens on port {port} yet",
            "fine before the first node's job starts; otherwise start node rank 0 first, "
            "or check that MASTER_PORT matches its port",
        )
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else e.strerror or str(e)
        return failed(
            "master_port",
            f"cannot reach {addr}:{port}: {reason}",
            f"check that {addr} is the first node's address as this node sees it, "
            f"and that firewalls let port {port} through between nodes",
        )
    return passed("master_port", f"{addr}:{port} answers (the rendezvous is up)")


def _is_local(address: str) -> bool:
    if ipaddress.ip_address(address.split("%")[0]).is_loopback:
        return True
    with contextlib.suppress(OSError), socket.socket(_family(address), socket.SOCK_DGRAM) as s:
        s.bind((address, 0))
        return True
    return False


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _owner(port: int) -> str:
    """Who listens on the port, when this user may know."""
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                process = psutil.Process(conn.pid)
                return f" by pid {conn.pid} ({' '.join(process.cmdline()[:4]) or process.name()})"
    return ""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])
