"""The GPU driver's own word on a GPU that failed: ``NVRM: Xid (PCI:0000:5d:00): 79, ... GPU has fallen off the
bus.`` (the kernel's log, as ``dmesg`` shows it), placed on the rank NCCL's member lines put on that GPU (its
``busId 5d000``, on the line's host where the line names one). The codes of the hardware, not the program's (an
Xid 13 or 31 is most often a kernel's own bad access), are said as the GPU's fault."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.nccl import NcclLines
from distmon.guards.text import visible

MAX_XIDS = 64
_XID = re.compile(
    r"NVRM: Xid \(PCI:(?:[0-9a-fA-F]{4}:)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.\d)?\): (\d{1,3})\b(.{0,200})"
)
HARDWARE = {
    48: "a double-bit ECC error",
    63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapping failed",
    74: "an NVLink error",
    79: "the GPU has fallen off the bus",
    92: "a high single-bit ECC error rate",
    94: "a contained ECC error",
    95: "an uncontained ECC error",
    119: "the GSP timed out",
    120: "the GSP failed",
}
"""Xid codes of the GPU's hardware or its links (NVIDIA's Xid catalogue), with what each says."""


@dataclass
class XidLines:
    """The GPUs the driver's Xid lines say failed: (host the line came from, NCCL's bus id, code)."""

    failed: list[tuple[str, str, int]] = field(default_factory=list)

    def line(self, body: str, host: str) -> bool:
        found = _XID.search(body) if "Xid" in body else None
        if found is None:
            return False
        bus, device, code = found.group(1), found.group(2), int(found.group(3))
        if code in HARDWARE and len(self.failed) < MAX_XIDS:
            self.failed.append((visible(host, 200), f"{bus}{device}0".lower(), code))
        return True

    def suspected(self, nccl: NcclLines) -> list[tuple[int, str]]:
        """The ranks on the GPUs that failed, as NCCL's member lines place them (on each host that has such a GPU,
        where the Xid's line names none: each of them alike)."""
        found = []
        for host, bus, code in self.failed:
            on = sorted((h, rank) for (h, b), (_, rank, _) in nccl.gpus.items() if b.lower() == bus and host in ("", h))
            hosts = ", ".join(h for h, _ in on) if len(on) > 1 else (on[0][0] if on else "")
            where = f"on {hosts}" if len(on) < 2 else f"on one of {hosts}: the line names no host"
            said = f"the GPU driver's Xid {code} on the GPU of bus id {bus} {where}: {HARDWARE[code]}; drain its node"
            found += [(rank, said) for _, rank in on]
        return found
