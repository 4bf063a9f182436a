"""distmon/node/links.py on a fake sysfs tree: what a node's links are, and what changed in words."""

from __future__ import annotations

import time
from pathlib import Path

from distmon.node.links import IB, NET, Link, changes, read_links


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _interface(root: Path, name: str, state: str, carrier: str | None, downs: int, physical: bool = True) -> None:
    net = root / "sys/class/net" / name
    _write(net / "operstate", state)
    if carrier is not None:
        _write(net / "carrier", carrier)
    _write(net / "carrier_changes", str(2 * downs + 1))
    _write(net / "carrier_down_count", str(downs))
    if physical:
        (net / "device").mkdir(exist_ok=True)


def _port(root: Path, device: str, port: int, state: str, phys: str, downed: int) -> None:
    path = root / "sys/class/infiniband" / device / "ports" / str(port)
    _write(path / "state", state)
    _write(path / "phys_state", phys)
    _write(path / "counters/link_downed", str(downed))


def test_links_are_read_physical_interfaces_first_then_infiniband_ports_loopback_left_out(tmp_path: Path) -> None:
    _interface(tmp_path, "lo", "unknown", "1", 0)
    _interface(tmp_path, "docker0", "down", None, 0, physical=False)
    _interface(tmp_path, "eth0", "up", "1", 3)
    _port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", 7)
    links = read_links(tmp_path)
    assert links == [
        Link("eth0", NET, "up", True, 3),
        Link("docker0", NET, "down", None, 0),
        Link("mlx5_0 port 1", IB, "ACTIVE", None, 7, "LinkUp"),
    ]
    assert [link.up for link in links] == [True, False, True]


def test_reading_is_bounded_and_a_missing_tree_is_no_links(tmp_path: Path) -> None:
    for i in range(40):
        _interface(tmp_path, f"veth{i:02d}", "up", "1", 0, physical=False)
    assert len(read_links(tmp_path)) == 32
    assert len(read_links(tmp_path, limit=3)) == 3
    assert read_links(tmp_path / "nowhere") == []


def test_a_cable_pulled_and_a_port_that_flapped_are_said_in_words(tmp_path: Path) -> None:
    _interface(tmp_path, "eth0", "up", "1", 1)
    _interface(tmp_path, "eth1", "up", "1", 0)
    _port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", 3)
    before = read_links(tmp_path)
    _interface(tmp_path, "eth0", "down", "0", 2)
    _port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", 4)
    t = time.mktime((2026, 11, 28, 14, 2, 11, 0, 0, -1))
    said = changes(before, read_links(tmp_path), t)
    assert [(c.said(), c.down) for c in said] == [
        ("eth0 went down (carrier lost) at 14:02:11", True),
        ("mlx5_0 port 1 link_downed 3 -> 4 at 14:02:11", True),
    ]
    again = read_links(tmp_path)
    _interface(tmp_path, "eth0", "up", "1", 2)
    assert [(c.words, c.down) for c in changes(again, read_links(tmp_path), t + 5)] == [("eth0 came back up", False)]
    assert changes(again, again, t) == []


def test_a_port_going_down_names_its_physical_state_and_a_link_gone_is_said(tmp_path: Path) -> None:
    _port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", 0)
    _interface(tmp_path, "ib0", "up", "1", 0)
    before = read_links(tmp_path)
    _port(tmp_path, "mlx5_0", 1, "1: DOWN", "2: Polling", 1)
    after = [link for link in read_links(tmp_path) if link.name != "ib0"]
    said = [c.words for c in changes(before, after, 0.0)]
    assert said == ["mlx5_0 port 1 went down (phys_state Polling)", "ib0 is gone"]
