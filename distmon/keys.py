"""The job's key file: ZeroMQ CURVE keys that authenticate and encrypt the ranks' reports.

One file holds what both sides need, so one file is handed around (``distmon keygen FILE``
writes it): the monitor is the CURVE server and holds the server key pair; every rank is a
client presenting the job's client key pair and checking the server's public key. The
monitor hears only clients presenting the job's client key; a rank reaches only a monitor
holding the job's server key. Anyone holding the file is of the job, so it is written
0600 and refused when group or others may read it.

Format: JSON, ``{"format": "distmon-key", "version": 1, "server": {"public": Z85,
"secret": Z85}, "client": {"public": Z85, "secret": Z85}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
from dataclasses import dataclass

import zmq
from zmq.auth.thread import ThreadAuthenticator

ENV = "DISTMON_KEY_FILE"
FORMAT = "distmon-key"
VERSION = 1


class KeyFileError(Exception):
    """The key file cannot be written or used; the message says why in one line."""


@dataclass(frozen=True)
class KeyPair:
    public: bytes
    secret: bytes


@dataclass(frozen=True)
class JobKey:
    server: KeyPair
    client: KeyPair


def resolve_key_file(explicit: str | None = None) -> str | None:
    """The key file to use: ``--key-file``, else ``$DISTMON_KEY_FILE``, else none."""
    return explicit or os.environ.get(ENV) or None


def add_key_file_argument(parser: argparse.ArgumentParser) -> None:
    """``--key-file``, the same on every monitor command."""
    parser.add_argument(
        "--key-file",
        metavar="FILE",
        help=f"hear only ranks holding this job key (from distmon keygen; default: ${ENV})",
    )


def load_for(explicit: str | None) -> JobKey | None:
    """The key named by ``--key-file`` or ``$DISTMON_KEY_FILE``, if any; raises :class:`KeyFileError`."""
    path = resolve_key_file(explicit)
    return None if path is None else load_key(path)


def fresh() -> JobKey:
    """A new job key, held in memory (``distmon look`` makes one for the nodes it reaches)."""
    return JobKey(KeyPair(*zmq.curve_keypair()), KeyPair(*zmq.curve_keypair()))


def content_of(key: JobKey) -> dict[str, object]:
    """The key as a key file holds it."""
    return {"format": FORMAT, "version": VERSION, "server": _pair(key.server), "client": _pair(key.client)}


def generate(path: str) -> JobKey:
    """Write a fresh key file at ``path`` (mode 0600); an existing file is never replaced."""
    key = fresh()
    content = content_of(key)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        raise KeyFileError(f"cannot write {path}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)  # whatever the umask
        json.dump(content, f, indent=2)
        f.write("\n")
    return key


def load_key(path: str) -> JobKey:
    """Read and check a key file; raises :class:`KeyFileError`."""
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise KeyFileError(f"{path} is not a key file")
            if mode & 0o077:
                raise KeyFileError(
                    f"{path} is open to others (mode {stat.S_IMODE(mode):04o}); "
                    f"anyone who reads it can pose as a rank: chmod 600 {path}"
                )
            content = json.loads(f.read(4096))
    except OSError as e:
        raise KeyFileError(f"cannot read the key file {path}: {e.strerror}") from None
    except ValueError:
        raise KeyFileError(f"{path} is not a distmon key file (write one with distmon keygen)") from None
    return key_from(content, path)


def key_from(content: object, where: str) -> JobKey:
    """The key a key file's content holds (read from ``where``); raises :class:`KeyFileError`."""
    if not isinstance(content, dict) or content.get("format") != FORMAT or content.get("version") != VERSION:
        raise KeyFileError(f"{where} is not a distmon key file (write one with distmon keygen)")
    return JobKey(_checked(content.get("server"), where), _checked(content.get("client"), where))


def as_server(socket: zmq.Socket[bytes], key: JobKey) -> None:
    """Make ``socket`` (before it binds) the CURVE server of the job."""
    socket.curve_server = True
    socket.curve_publickey = key.server.public
    socket.curve_secretkey = key.server.secret


def as_client(socket: zmq.Socket[bytes], key: JobKey) -> None:
    """Make ``socket`` (before it connects) a CURVE client of the job's monitor."""
    socket.curve_publickey = key.client.public
    socket.curve_secretkey = key.client.secret
    socket.curve_serverkey = key.server.public


def admit_job_clients(context: zmq.Context[zmq.Socket[bytes]], key: JobKey) -> ThreadAuthenticator:
    """Start the ZAP handler of ``context``'s CURVE servers: it lets in only clients presenting
    the job's client key. Stop it before terminating the context."""
    return admit(context, JobClients(key))


def admit(context: zmq.Context[zmq.Socket[bytes]], clients: JobClients) -> ThreadAuthenticator:
    """Start the ZAP handler of ``context``'s CURVE servers: it lets in only ``clients``."""
    authenticator = ThreadAuthenticator(context)
    authenticator.start()
    authenticator.configure_curve_callback("*", credentials_provider=clients)
    return authenticator


class JobClients:
    """The ZAP handler's test: the client presents the client key of one of the keys admitted
    (the job's; a look's, for the nodes it reached)."""

    def __init__(self, *admitted: JobKey) -> None:
        self._public = {key.client.public for key in admitted}

    def admit(self, key: JobKey) -> None:
        self._public.add(key.client.public)

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self._public


def _pair(pair: KeyPair) -> dict[str, str]:
    return {"public": pair.public.decode("ascii"), "secret": pair.secret.decode("ascii")}


def _checked(pair: object, path: str) -> KeyPair:
    if isinstance(pair, dict) and isinstance(pair.get("public"), str) and isinstance(pair.get("secret"), str):
        public, secret = pair["public"].encode(), pair["secret"].encode()
        with contextlib.suppress(ValueError, zmq.ZMQError):
            if zmq.curve_public(secret) == public:
                return KeyPair(public, secret)
    raise KeyFileError(f"{path} is damaged: a key pair does not match (write a new one with distmon keygen)")
