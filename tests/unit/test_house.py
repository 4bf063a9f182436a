"""What keeps the code readable, checked where a reviewer would check it by hand."""

from __future__ import annotations

import ast

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
