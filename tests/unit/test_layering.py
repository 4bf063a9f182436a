"""The split by where code runs, proved at run time in a fresh interpreter.

The watch side runs where torch may not be installed, and must start fast; the rank side
runs inside training and must not pay for Textual. Imports hidden in functions would
escape a static check, so each side's modules are imported for real and ``sys.modules``
is read. (``lint-imports`` checks the same contracts statically, see pyproject.toml.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

WATCH_SIDE_COMMANDS = (
    "watch",
    "record",
    "replay",
    "report",
    "analyze",
    "relay",
    "shared.acting",
    "shared.live",
    "shared.metrics_port",
    "shared.signals",
)


def imported_after(code: str) -> set[str]:
    """Names in ``sys.modules`` after running ``code`` in a new interpreter."""
    probe = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {name.partition(".")[0] for name in modules}


def test_watch_side_never_imports_torch():
    modules = imported_after(
        f"""
        import importlib, pkgutil
        import distmon.cli, distmon.endpoint, distmon.wire.sockets, distmon.wire.column_batch
        import distmon.actions, distmon.export, distmon.monitor, distmon.node, distmon.tui
        for package in (distmon.actions, distmon.export, distmon.monitor, distmon.node, distmon.tui):
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(module.name)
        for command in {WATCH_SIDE_COMMANDS!r}:
            importlib.import_module("distmon.commands." + command)
        """
    )
    assert {
        "distmon.monitor.rules.detector",
        "distmon.tui.app",
        "distmon.commands.relay",
        "distmon.export.html",
    } <= modules
    assert "torch" not in top_level(modules)


def test_rank_side_never_imports_textual_or_the_watch_side():
    modules = imported_after(
        """
        import importlib, pkgutil
        import distmon.hooks
        for module in pkgutil.walk_packages(distmon.hooks.__path__, "distmon.hooks."):
            importlib.import_module(module.name)
        """
    )
    assert {"torch", "distmon.hooks.agent"} <= modules
    assert "textual" not in top_level(modules)
    assert not {m for m in modules if m.startswith(("distmon.monitor", "distmon.tui"))}


def test_cli_help_imports_no_command():
    modules = imported_after(
        """
        import contextlib, io
        import distmon.cli
        with contextlib.redirect_stdout(io.StringIO()):
            distmon.cli.main([])
        """
    )
    assert not {m for m in modules if m.startswith("distmon.commands.")}
    assert not {"torch", "textual"} & top_level(modules)
