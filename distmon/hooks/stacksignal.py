"""faulthandler armed on a signal, so that every thread's Python stack can be taken from
outside a rank that may not be traced (see :mod:`distmon.node.faultstacks`, which reads it).

Armed only where the signal is free: its handler, as the kernel has it (``sigaction``: a
handler installed from C or by the training's own ``faulthandler.register`` too, which
``signal.getsignal`` does not see), is the default one; where that cannot be read, nothing
is armed. A handler the training installs later wins: :func:`keep` then removes the file,
so that no reader signals a handler that is not faulthandler's. The file is opened once,
append-only (the reader empties it after each dump), and removed at exit, or by the next
rank to arm on the host where its process was killed; a forked child (a DataLoader worker)
drops it. Nothing here raises.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import faulthandler
import itertools
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from distmon.node import faultstacks

MAX_SWEPT = 4096
"""Files looked at when arming, for those of processes gone."""
SIGACTION_BYTES = 512
"""Room for libc's ``struct sigaction`` (152 bytes on x86-64 and aarch64)."""


@dataclass(frozen=True)
class _Armed:
    sig: int
    fd: int
    path: Path
    handler: int | None
    """The kernel's handler for ``sig`` once armed: faulthandler's."""
    pid: int


_armed: _Armed | None = None
_hooked = False


def arm() -> Path | None:
    """Arm faulthandler on :func:`distmon.node.faultstacks.stack_signal` for this process; its
    file, or None where it is turned off, the signal is taken, or anything fails."""
    global _armed
    try:
        if _armed is not None and _armed.pid == os.getpid():
            return _armed.path
        sig = faultstacks.stack_signal()
        if sig is None or _handler(sig) != 0:
            return None
        path = faultstacks.stack_file(os.getpid(), os.getuid())
        _private(path.parent)
        _sweep(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            faulthandler.register(sig, file=fd, all_threads=True, chain=False)
        except (OSError, RuntimeError, ValueError):
            os.close(fd)
            path.unlink(missing_ok=True)
            return None
        _armed = _Armed(sig=sig, fd=fd, path=path, handler=_handler(sig), pid=os.getpid())
        _hook_once()
        return path
    except Exception:
        return None


def keep() -> None:
    """Remove the file (no reader signals this process any more) once the training has put a
    handler of its own on the signal; called by the agent each interval."""
    armed = _armed
    with contextlib.suppress(Exception):
        if armed is not None and not _ours(armed):
            _drop(unlink=True)


def disarm() -> None:
    """Unregister faulthandler and remove the file; at exit, and on ``detach()``."""
    with contextlib.suppress(Exception):
        if _armed is not None and _armed.pid == os.getpid():
            _drop(unlink=True)


def _drop(unlink: bool) -> None:
    """Forget the arming. faulthandler is unregistered and the file closed only while its
    handler is still the kernel's: unregistering restores the handler it replaced (the
    default) over the training's, and a closed descriptor may be reused by a file of the
    training's, which a handler chaining to faulthandler's would then write into."""
    global _armed
    armed, _armed = _armed, None
    if armed is None:
        return
    if _ours(armed):
        faulthandler.unregister(armed.sig)
        os.close(armed.fd)
    if unlink:
        armed.path.unlink(missing_ok=True)


def _ours(armed: _Armed) -> bool:
    return _handler(armed.sig) == armed.handler


def _in_child() -> None:
    """A forked child (a DataLoader worker) writes no dump into its parent's file."""
    with contextlib.suppress(Exception):
        _drop(unlink=False)


def _hook_once() -> None:
    global _hooked
    if not _hooked:
        _hooked = True
        atexit.register(disarm)
        os.register_at_fork(after_in_child=_in_child)


def _private(directory: Path) -> None:
    """``directory`` and its parent, made 0700 (as the monitor's socket directory is): each
    must be a directory of this user, or nothing is armed (OSError)."""
    for path in (directory.parent, directory):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise OSError(f"{path} is not a directory of this user")
        if info.st_mode & 0o077:
            os.chmod(path, 0o700)


def _sweep(directory: Path) -> None:
    """Remove the files of processes gone: one killed (SIGKILL, the OOM killer) ran no exit
    to remove its own. Names are pids as the ranks know themselves, as this /proc does."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in itertools.islice(entries, MAX_SWEPT):
            if entry.name.isdigit() and not os.path.exists(f"/proc/{entry.name}"):
                os.unlink(entry.path)


def _handler(sig: int) -> int | None:
    """The handler the kernel runs for ``sig`` (0: the default, 1: ignored), read with
    ``sigaction``; None where it cannot be read."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        libc = ctypes.CDLL(None, use_errno=True)
        action = ctypes.create_string_buffer(SIGACTION_BYTES)
        if libc.sigaction(sig, None, action) == 0:
            return ctypes.c_void_p.from_buffer(action).value or 0
    return None
