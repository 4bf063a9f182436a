"""Where ranks and the monitor meet. Ranks connect; the monitor (or a node's relay) binds."""

from __future__ import annotations

import ipaddress
import os
import socket as sockets
import stat
import tempfile

import zmq

ENV = "DISTMON_ENDPOINT"
VIEW_SUFFIX = ".view"
"""A monitor's screens attach beside its ranks' ipc socket, at the same path with this added."""


class EndpointError(Exception):
    """The endpoint cannot be bound (in use, bad address); the message says why."""


class PrivateDirError(Exception):
    """The default socket's directory is not this user's alone; the message says why."""


def private_dir() -> str:
    """The default socket's directory: this user's, mode 0700, so no one else can connect."""
    return os.path.join(tempfile.gettempdir(), f"distmon-{os.getuid()}")


def default_endpoint() -> str:
    """An ipc socket private to this user on this host, so a single-node job and a monitor
    started on the same host find each other without configuration."""
    return f"ipc://{private_dir()}/monitor.sock"


def make_private_dir() -> None:
    """Create :func:`private_dir` 0700, or check that an existing one is ours and closed."""
    path = private_dir()
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise PrivateDirError(f"cannot create {path}: {e.strerror}") from None
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PrivateDirError(f"{path} is not a directory of yours: remove it, or choose --endpoint")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def bind(socket: zmq.Socket[bytes], endpoint: str) -> None:
    """Bind ``socket`` where ranks connect to ``endpoint``; the default socket's directory is
    made private first. Raises :class:`EndpointError`, also for an ipc socket another process
    listens on, as binding a TCP port in use does."""
    try:
        if endpoint == default_endpoint():
            make_private_dir()
        if endpoint.startswith("ipc://") and listened(endpoint[len("ipc://") :]):
            raise EndpointError(
                f"cannot listen on {endpoint}: another monitor or relay listens there (stop it, or choose --endpoint)"
            )
        socket.bind(bind_address(endpoint))
    except PrivateDirError as e:
        raise EndpointError(f"cannot listen on {endpoint}: {e}") from None
    except zmq.ZMQError as e:
        raise EndpointError(f"cannot listen on {endpoint}: {zmq.strerror(e.errno or 0)}") from None


def listened(path: str) -> bool:
    """Whether a process listens on the unix socket at ``path`` (``@name``: an abstract one).
    ZeroMQ would bind over it without a word, and every rank that connects from then on would
    report to the newcomer, the first monitor recording none of them. A socket file left by a
    monitor that died is not listened on. The probe connects and closes at once: a monitor
    with a key counts it as a connection refused for want of one."""
    address = "\0" + path[1:] if path.startswith("@") else path
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as probe:
        try:
            probe.connect(address)
        except OSError:
            return False
    return True


def exposure_warning(endpoint: str) -> str | None:
    """One line for a monitor that listens beyond this host without a key, else None."""
    bound = bind_address(endpoint)
    if not bound.startswith("tcp://"):
        return None
    host = bound[len("tcp://") :].rpartition(":")[0].strip("[]")
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass  # "*" or an interface name: every host on that network
    return (
        f"distmon: warning: listening on {endpoint} without a key: anyone who can reach it can send "
        "fake rank reports (false alerts, hidden failures) and read the job's reports on the way; "
        "use --key-file (see distmon keygen)"
    )


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


def viewer_address(endpoint: str) -> str:
    """Where screens attach to the monitor whose ranks connect to ``endpoint``, so that a user
    needs one address: the next port on TCP (``tcp://node001:5599`` -> ``tcp://node001:5600``),
    else the same path with :data:`VIEW_SUFFIX` added. Raises :class:`EndpointError` for a port
    with no next one."""
    if not endpoint.startswith("tcp://"):
        return endpoint + VIEW_SUFFIX
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65535:
        raise EndpointError(f"{endpoint} has no port after its own for screens to attach to")
    return f"tcp://{host}:{int(port) + 1}"
