"""What keeps the code readable, checked where a reviewer would check it by hand."""

from __future__ import annotations

import ast

import grimp

from tests.support.paths import REPO

MAX_FUNCTION_LINES = 80


def test_no_function_is_over_80_lines() -> None:
    long = []
    for path in sorted((REPO / "distmon").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, long


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    long = []
    for path in sorted((REPO / "distmon").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not long, long


def test_no_modules_import_one_another_in_a_circle() -> None:
    """A circle of imports (type-checking ones too) is a seam missing: each file of it can be
    read, changed and tested only with all the others."""
    graph = grimp.build_graph("distmon")
    circles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                circles.add(" -> ".join((module, *back)))
    assert not circles, sorted(circles)


def test_no_signature_defaults_to_the_default_thresholds() -> None:
    """The monitor's thresholds are its detector's, held by the job and handed to whoever
    judges: a parameter defaulting to ``LIMITS`` judges by others when its caller forgets."""
    defaulted = []
    for path in sorted((REPO / "distmon").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
                if any(
                    isinstance(d, ast.Name | ast.Attribute) and ast.unparse(d).split(".")[-1] == "LIMITS"
                    for d in defaults
                ):
                    defaulted.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not defaulted, defaulted


PUBLIC_TWINS = {"DistmonCallback"}
"""Names a user imports from more than one module on purpose: each integration's callback."""


def test_each_class_name_means_one_class() -> None:
    """A name that means two classes makes a reader ask which one at every use."""
    where: dict[str, list[str]] = {}
    for path in sorted((REPO / "distmon").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name not in PUBLIC_TWINS:
                where.setdefault(node.name, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    twins = {name: places for name, places in where.items() if len(places) > 1}
    assert not twins, twins


NAMED_AFTER_ANOTHER = frozenset({"commands", "rules"})
"""Packages whose modules are named after another's on purpose: a command as it is typed
(``commands/relay.py`` runs ``node/relay.py``), a rule after what it judges
(``rules/nodes.py`` judges what ``state/nodes.py`` holds)."""


def test_each_module_name_means_one_module() -> None:
    """Two modules of one name (``columns``, ``files``) make every import and every traceback a
    question of which; a command or a rule may share the name of what it runs or judges."""
    where: dict[str, list[str]] = {}
    for path in sorted((REPO / "distmon").rglob("*.py")):
        if path.stem not in {"__init__", "__main__"} and path.parent.name not in NAMED_AFTER_ANOTHER:
            where.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    twins = {name: places for name, places in where.items() if len(places) > 1}
    assert not twins, twins


COMMAND_PROTOCOL = frozenset({"add_arguments", "run"})
"""Functions each command module defines for ``distmon/cli.py``, which calls them on whichever
command was typed (``module.add_arguments(parser)``, ``module.run(args)``): one protocol, a
definition per command."""


def test_each_public_function_name_means_one_function() -> None:
    """A public function's name says which thing it does (``decode_looks``, not a second
    ``decode`` beside the wire's), so a reader, a grep or a traceback need not ask which module
    it came from; but for the protocol the CLI calls on every command. A function's overloads
    are one function, in one module."""
    where: dict[str, set[str]] = {}
    for path in sorted((REPO / "distmon").rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                where.setdefault(node.name, set()).add(str(path.relative_to(REPO)))
    twins = {name: sorted(places) for name, places in where.items() if len(places) > 1}
    assert twins.keys() <= COMMAND_PROTOCOL, {name: twins[name] for name in twins.keys() - COMMAND_PROTOCOL}


MUTATORS = frozenset(
    {"update", "clear", "pop", "popitem", "setdefault", "append", "extend", "add", "discard", "remove"}
)
STATE_NAMES = frozenset({"state", "job"})
"""How the monitor's state is named where it is held: ``monitor.state``, a rule's ``job``."""


def _holds_state(node: ast.expr) -> bool:
    """``node`` is something reached through the monitor's state (``monitor.state.admission``,
    ``job.cols``): an attribute of it, at any depth."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        inner = node.value
        if isinstance(inner, ast.Name) and inner.id in STATE_NAMES:
            return True
        if isinstance(inner, ast.Attribute) and inner.attr == "state":
            return True
        node = inner
    return False


def test_the_monitors_state_is_written_by_its_own_package_only() -> None:
    """The job's state changes through its own methods, which say what happened
    (``state.refused(...)``, ``state.told.spoke(host)``): outside ``distmon/monitor/state/``
    nothing assigns to what it holds, nor updates a container of it."""
    written = []
    state = REPO / "distmon" / "monitor" / "state"
    readers = [REPO / "distmon" / part for part in ("monitor", "tui", "export", "actions", "forensics", "commands")]
    for path in sorted(p for folder in readers for p in folder.rglob("*.py")):
        if path.is_relative_to(state):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                targets = [node.func.value] if isinstance(node.func.value, ast.Attribute | ast.Subscript) else []
            written += [f"{path.relative_to(REPO)}:{node.lineno}" for t in targets if _holds_state(t)]
    assert not written, written
