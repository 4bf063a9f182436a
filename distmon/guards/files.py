"""Opening a file someone else made: only a regular file is opened for reading.

A FIFO among the files would block the reader forever, a device would never end, and a
socket cannot be read at all; each is refused by what ``stat`` says, without being opened.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO


class NotAFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: it was not opened."""


def special(mode: int) -> str | None:
    """What a file that is no regular file is, in a few words; None for a regular file."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path: str) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file; raises :class:`NotAFile`
    otherwise, without opening it. It is opened without blocking and checked again, so that a
    file swapped for a FIFO in between is refused too."""
    kind = special(os.stat(path).st_mode)
    if kind is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        kind = special(os.fstat(fd).st_mode)
        if kind is None:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        os.close(fd)
    raise NotAFile(errno.EINVAL, f"{kind}, not a file: not opened")


def why_not(path: str, e: OSError) -> str:
    """Why ``path`` could not be read, in a few words."""
    if isinstance(e, NotAFile):
        return str(e.strerror)
    if e.errno == errno.ELOOP:
        return "a symlink loop"
    if e.errno == errno.ENOENT and os.path.islink(path):
        return "a symlink to nothing"
    if e.errno == errno.ENOENT:
        return "no such file or folder"
    return f"cannot read ({e.strerror})"
