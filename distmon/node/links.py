"""A node's network links, read from sysfs, and what changed between two readings, in words.

When a node falls silent, whether its link went down is the evidence that tells a cut network
from a dead process. The kernel keeps it: every interface's ``operstate``, ``carrier`` and the
count of carrier changes under ``/sys/class/net``, and every InfiniBand port's state and its
``link_downed`` counter under ``/sys/class/infiniband``. A node's relay reads them each
interval (a few dozen small files) and says what changed, so that a link that went down is
told once the node can be heard again, with when.

No torch, no monitor: the relay and the monitor both read this module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

MAX_LINKS = 32
"""Links read per node: physical interfaces first, then the rest by name."""
MAX_FILE = 64
"""Bytes read of a sysfs file: each holds a word or a number."""
NET, IB = "net", "ib"
"""The kinds of link: an interface of ``/sys/class/net``, a port of ``/sys/class/infiniband``."""
UP_STATES = frozenset({"up", "ACTIVE"})


@dataclass(frozen=True, slots=True)
class Link:
    """One link as read: an interface (``eth0``) or an InfiniBand port (``mlx5_0 port 1``)."""

    name: str
    kind: str
    state: str
    """``operstate`` (up, down, lowerlayerdown, unknown, ...), or the port's state (ACTIVE, DOWN, INIT, ...)."""
    carrier: bool | None = None
    """Whether the interface has a carrier (None: the kernel does not say, as while it is down)."""
    flaps: int | None = None
    """An interface's carrier losses (``carrier_down_count``, else half of ``carrier_changes``),
    a port's ``link_downed``: counters that tell a link that went down and came back between
    two readings."""
    phys: str = ""
    """A port's physical state (LinkUp, Polling, Disabled, ...)."""

    @property
    def up(self) -> bool:
        return self.state in UP_STATES and self.carrier is not False


@dataclass(frozen=True, slots=True)
class LinkChange:
    """What changed on one link between two readings, at the later one's time ``t``."""

    t: float
    link: str
    words: str
    down: bool
    """It went down, lost its carrier, or its down counter moved: evidence against the network."""
    went: str = ""
    """``down`` or ``up`` where the link went so; empty where only its counters or state words
    changed."""
    drops: int = 0
    """Times it went down and came back up between the two readings, told by its counter."""

    def said(self) -> str:
        """``eth0 went down (carrier lost) at 14:02:11``, in the local time zone."""
        return f"{self.words} at {time.strftime('%H:%M:%S', time.localtime(self.t))}"


def read_links(root: Path = Path("/"), limit: int = MAX_LINKS) -> list[Link]:
    """The node's links under ``root`` (``/``; a test's fake tree), at most ``limit``; a link
    whose files cannot be read is left out, never raised."""
    links = [link for path in _interfaces(root / "sys/class/net") if (link := _interface(path)) is not None]
    for device in _sorted_dirs(root / "sys/class/infiniband"):
        links.extend(p for port in _sorted_dirs(device / "ports") if (p := _port(device.name, port)) is not None)
    return links[:limit]


def changes(before: list[Link], after: list[Link], t: float) -> list[LinkChange]:
    """What changed from ``before`` to ``after`` (read at ``t``), a change per link that changed."""
    old = {link.name: link for link in before}
    found = []
    for link in after:
        was = old.pop(link.name, None)
        change = _appeared(t, link) if was is None else _changed(t, was, link)
        if change is not None:
            found.append(change)
    found.extend(LinkChange(t, name, f"{name} is gone", True) for name in old)
    return found


def _changed(t: float, was: Link, now: Link) -> LinkChange | None:
    if was.up and not now.up:
        why = " (carrier lost)" if was.carrier and now.carrier is False else ""
        phys = f" (phys_state {now.phys})" if now.phys and now.phys != was.phys else ""
        return LinkChange(t, now.name, f"{now.name} went down{why or phys}", True, went="down")
    if now.up and not was.up:
        return LinkChange(t, now.name, f"{now.name} came back up", False, went="up")
    if was.flaps is not None and now.flaps is not None and now.flaps > was.flaps:
        counter = "link_downed" if now.kind == IB else "carrier losses"
        words = f"{now.name} {counter} {was.flaps} -> {now.flaps}"
        return LinkChange(t, now.name, words, True, drops=now.flaps - was.flaps if now.up else 0)
    if was.state != now.state:
        return LinkChange(t, now.name, f"{now.name} {was.state} -> {now.state}", False)
    return None


def _appeared(t: float, link: Link) -> LinkChange | None:
    return None if link.up else LinkChange(t, link.name, f"{link.name} is {link.state}", True)


def _interfaces(net: Path) -> list[Path]:
    """Every interface but ``lo``, the physical ones (with a ``device``) first."""
    found = [p for p in _sorted_dirs(net) if p.name != "lo"]
    return sorted(found, key=lambda p: not (p / "device").exists())


def _interface(path: Path) -> Link | None:
    state = _word(path / "operstate")
    if state is None:
        return None
    carrier = _number(path / "carrier")
    downs = _number(path / "carrier_down_count")
    if downs is None and (flips := _number(path / "carrier_changes")) is not None:
        downs = flips // 2
    return Link(path.name, NET, state, None if carrier is None else carrier == 1, downs)


def _port(device: str, path: Path) -> Link | None:
    state = _word(path / "state")
    if state is None:
        return None
    phys = _word(path / "phys_state") or ""
    return Link(f"{device} port {path.name}", IB, state, None, _number(path / "counters/link_downed"), phys)


def _sorted_dirs(path: Path) -> list[Path]:
    try:
        return sorted((p for p in path.iterdir() if p.is_dir()), key=lambda p: p.name)
    except OSError:
        return []


def _word(path: Path) -> str | None:
    """A sysfs value's word: ``up``; ``ACTIVE`` of ``4: ACTIVE``."""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_FILE).decode(errors="replace").strip()
    except OSError:
        return None
    return text.rpartition(": ")[2] or None


def _number(path: Path) -> int | None:
    word = _word(path)
    return int(word) if word is not None and word.isdigit() else None
