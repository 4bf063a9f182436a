"""Real nodes on this machine: each a network namespace with an address and a host name of its
own, joined by a bridge in the root namespace, where the monitor listens as on a head node
(``shared/multi-node.md``). Its link can be cut as a node's network fails. Root only: tests skip
where namespaces cannot be made. Everything made is removed on leaving."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SUBNET = "198.18.{n}.{host}"
"""RFC 2544's benchmarking range: addresses no network routes, given only inside the
namespaces made here (and the bridge joining them)."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def can_make_nodes() -> str | None:
    """Why nodes cannot be made here, or None where they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs ip (iproute2) and unshare (util-linux)"
    name = f"dmchk{os.getpid() % 100000}"
    try:
        _ip("netns", "add", name)
    except (subprocess.SubprocessError, OSError) as e:
        return f"cannot make a network namespace: {e}"
    _ip("netns", "del", name)
    return None


@dataclass
class Node:
    name: str
    """Its host name (``node-a``)."""
    namespace: str
    address: str
    inside: str
    """Its end of the link, inside the namespace (for ``GLOO_SOCKET_IFNAME``)."""
    outside: str
    """The link's end in the root namespace: down, the node is cut off."""

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this node: in its namespace, under its host name."""
        return ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "sh", "-c",
                f'hostname {self.name} && exec "$@"', self.name, *argv]  # fmt: skip

    def cut(self) -> None:
        """Its network fails: the link to the others goes down."""
        _ip("link", "set", self.outside, "down")

    def mend(self) -> None:
        """Its link comes back up (after :meth:`cut`): a link that flaps."""
        _ip("link", "set", self.outside, "up")


@contextlib.contextmanager
def nodes(names: Sequence[str]) -> Iterator[tuple[str, list[Node]]]:
    """Nodes named ``names`` and the head's address (the bridge's), made and then removed."""
    tag = os.getpid() % 10000
    n = 100 + tag % 100
    bridge = f"dmbr{tag}"
    made: list[Node] = []
    hosts_dirs: list[Path] = []
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", SUBNET.format(n=n, host=1) + "/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i, name in enumerate(names):
            namespace, inside, outside = f"dm{tag}n{i}", f"dmi{tag}{i}", f"dmo{tag}{i}"
            node = Node(name, namespace, SUBNET.format(n=n, host=2 + i), inside, outside)
            _ip("netns", "add", namespace)
            made.append(node)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", namespace)
            _ip("link", "set", outside, "master", bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", namespace, "addr", "add", node.address + "/24", "dev", inside)
            _ip("-n", namespace, "link", "set", inside, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        for node in made:
            hosts = Path("/etc/netns") / node.namespace
            hosts.mkdir(parents=True, exist_ok=True)
            hosts_dirs.append(hosts)
            lines = ["127.0.0.1 localhost", *(f"{other.address} {other.name}" for other in made)]
            (hosts / "hosts").write_text("\n".join(lines) + "\n")
        yield SUBNET.format(n=n, host=1), made
    finally:
        for node in made:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("link", "del", node.outside)
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _ip("netns", "del", node.namespace)
        for hosts in hosts_dirs:
            shutil.rmtree(hosts, ignore_errors=True)
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            _ip("link", "del", bridge)


def can_ssh() -> str | None:
    """Why nodes cannot be reached over ssh here, or None where they can."""
    if shutil.which(SSHD) is None and not Path(SSHD).exists():
        return "needs Debian's openssh-server (sshd)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "needs ssh and ssh-keygen (openssh-client)"
    return can_make_nodes()


SSHD = "/usr/sbin/sshd"


@contextlib.contextmanager
def ssh_to(made: Sequence[Node], folder: Path) -> Iterator[Path]:
    """An sshd on each of ``made``, inside its namespace under its host name, and an ssh config
    reaching each by name with a key made here (batch mode, the nodes' host keys known): yields
    the config's path, for ``ssh -F``. Everything started is stopped on leaving."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
    public = (folder / "host_key.pub").read_text().split()
    known = [f"{node.name},{node.address} {public[0]} {public[1]}" for node in made]
    (folder / "known_hosts").write_text("\n".join(known) + "\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    daemons: list[subprocess.Popen[bytes]] = []
    config = folder / "ssh_config"
    hosts = [f"Host {node.name}\n  HostName {node.address}\n" for node in made]
    config.write_text(
        "".join(hosts)
        + f"Host *\n  IdentityFile {folder / 'user_key'}\n  UserKnownHostsFile {folder / 'known_hosts'}\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"
    )
    try:
        for node in made:
            conf = folder / f"sshd-{node.name}.conf"
            conf.write_text(
                f"ListenAddress {node.address}\nHostKey {folder / 'host_key'}\n"
                f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / f'sshd-{node.name}.pid'}\n"
                "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nAcceptEnv LANG LC_*\n"
            )
            log = folder / f"sshd-{node.name}.log"
            daemons.append(subprocess.Popen(node.command([SSHD, "-D", "-f", str(conf), "-E", str(log)])))
        for node in made:
            _wait_for_ssh(config, node.name)
        yield config
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(10)


def _wait_for_ssh(config: Path, host: str) -> None:
    for _ in range(100):
        done = subprocess.run(["ssh", "-F", str(config), host, "true"], capture_output=True, timeout=30)
        if done.returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"sshd on {host} did not answer: {done.stderr.decode(errors='replace')}")
