"""What tests/support/scripts/many_groups.py issues, group by group: apart from the script, so that
its test reads the plan without importing torch (every test worker collects that test)."""

from __future__ import annotations

GROUPS: dict[str, tuple[list[list[int]], int]] = {
    "pair_a": ([[0, 1]], 1),
    "pair_b": ([[2, 3]], 2),
    "cross": ([[0, 2]], 3),
    "": ([[1, 3]], 4),
    "mesh_dp": ([[0, 2], [1, 3]], 5),
    "mesh_tp": ([[0, 1], [2, 3]], 6),
    "late": ([[0, 3]], 7),
}
"""desc -> (the groups of that description, collectives each issues). "" has no description."""
BARRIERS = 2
"""Collectives on the world group (``default_pg``)."""
MESSAGES: dict[str, list[tuple[int, int]]] = {
    "default_pg": [(0, 1), (1, 2), (2, 3), (3, 0)],
    "pair_a": [(0, 1), (0, 1), (1, 0)],
    "cross": [(2, 0)],
    "mesh_tp": [(1, 0), (3, 2)],
}
"""desc -> (source, destination) of each message, in order; the world group's are a ring
exchanged with batch_isend_irecv, once before distmon attaches (not numbered on its
channels: gloo keeps no record of it) and once after."""
