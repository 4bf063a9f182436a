"""A rank's stack where ptrace is refused (a container without SYS_PTRACE): a real process
that attached distmon's hook holds the GIL in a catastrophic regex, and a reader that may
not trace it (``capsh --drop=cap_sys_ptrace``, or a sibling under Yama) still gets its
threads' stacks from the faulthandler the hook armed; ``dump()`` says py-spy was refused
and that the stack came from faulthandler. A rank whose /tmp is its own (a container, a
sidecar's) is read through ``/proc/<pid>/root``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distmon.node.faultstacks import stack_file, take_fault_stacks
from distmon.node.pyspy import executable, yama_scope

RANK = textwrap.dedent(
    """
    import re, sys
    import distmon.hooks

    def catastrophic():
        return re.match(r"(a+)+$", "a" * 40 + "b")  # hours, holding the GIL in C

    distmon.hooks.attach()
    print("ready", flush=True)
    catastrophic()
    """
)

READER = textwrap.dedent(
    """
    import dataclasses, json, sys
    from distmon.node.faultstacks import take_fault_stacks
    from distmon.node.pyspy import dump

    pid = int(sys.argv[1])
    stacks = take_fault_stacks(pid)
    taken = dump(pid)
    print(json.dumps({"take": dataclasses.asdict(stacks), "dump": dataclasses.asdict(taken)}))
    """
)


def _refused() -> list[str]:
    """A command prefix under which ptrace is refused, or a skip saying why there is none."""
    capsh = shutil.which("capsh")
    if capsh and subprocess.run([capsh, "--drop=cap_sys_ptrace", "--", "-c", "true"], check=False).returncode == 0:
        return [capsh, "--drop=cap_sys_ptrace", "--"]
    if os.getuid() != 0 and (yama_scope() or 0) >= 1:
        return []  # the reader, a sibling of the rank, may not trace it
    pytest.skip("no way to refuse ptrace here: capsh cannot drop cap_sys_ptrace (apt-get install libcap2-bin)")


@pytest.fixture
def rank(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    script = tmp_path / "train.py"
    script.write_text(RANK)
    env = {**os.environ, "DISTMON_ENDPOINT": f"ipc://{tmp_path}/nobody.sock"}
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    assert process.stdout is not None
    try:
        assert process.stdout.readline() == b"ready\n"
        yield process
    finally:
        process.kill()
        process.wait()
        stack_file(process.pid, os.getuid()).unlink(missing_ok=True)  # killed: no exit to remove it


def _read(pid: int, prefix: list[str]) -> dict[str, dict[str, object]]:
    command = [sys.executable, "-c", READER, str(pid)]
    if prefix:  # capsh runs its argument through a shell
        command = [*prefix, "-c", shlex.join(command)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    result: dict[str, dict[str, object]] = json.loads(done.stdout)
    return result


def _funcs(frames: object) -> list[str]:
    assert isinstance(frames, list)
    return [frame["func"] for frame in frames]


def test_a_rank_holding_the_gil_in_a_regex_gives_its_stack_to_a_reader_refused_ptrace(
    rank: subprocess.Popen[bytes],
) -> None:
    prefix = _refused()
    assert stack_file(rank.pid, os.getuid()).exists()
    deadline = time.monotonic() + 30
    while True:  # "ready" is printed just before the regex starts
        seen = _read(rank.pid, prefix)
        threads = seen["take"]["threads"]
        assert isinstance(threads, list) and threads, seen
        main = threads[-1]  # the oldest thread, listed last
        if _funcs(main["frames"])[-2:] == ["catastrophic", "match"] or time.monotonic() > deadline:
            break
    assert seen["take"]["error"] is None, seen
    assert _funcs(main["frames"])[-2:] == ["catastrophic", "match"], main
    assert main["frames"][-2]["code"] == 'return re.match(r"(a+)+$", "a" * 40 + "b")  # hours, holding the GIL in C'
    assert len(threads) >= 2, threads  # the hook's agent thread too

    taken = seen["dump"]
    assert taken["how"] == "faulthandler" and _funcs(taken["frames"])[-2:] == ["catastrophic", "match"], taken
    partial = str(taken["partial"])
    assert partial.startswith("py-spy did not take it: "), partial
    if executable() is not None:
        assert "permission denied tracing pid" in partial, partial
    assert rank.poll() is None  # still matching: the signal only asked for its stack


def test_a_rank_whose_training_took_the_signal_is_never_signalled(tmp_path: Path) -> None:
    """The training's own handler on the signal: the hook arms nothing, and a reader refused
    ptrace says py-spy's refusal alone, without signalling the rank."""
    prefix = _refused()
    script = tmp_path / "train.py"
    script.write_text(
        "import signal, time\n"
        "from distmon.node import faultstacks\n"
        "from distmon.hooks import stacksignal\n"
        "signal.signal(faultstacks.DEFAULT_SIGNAL, lambda *_: print('signalled', flush=True))\n"
        "print('armed' if stacksignal.arm() else 'not armed', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"not armed\n"
        seen = _read(process.pid, prefix)
        assert seen["take"]["armed"] is False and seen["dump"]["how"] == "py-spy", seen
        assert seen["dump"]["frames"] is None and "faulthandler" not in str(seen["dump"]["error"])
    finally:
        process.kill()
        out, _ = process.communicate()
    assert b"signalled" not in out


def test_a_rank_with_a_tmp_of_its_own_is_read_through_its_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sidecar beside the rank's container shares its pids, not its temporary directory
    (a private one of the test's, not /tmp, which may hold the checkout and its venv)."""
    unshare = shutil.which("unshare")
    if os.getuid() != 0 or unshare is None:
        pytest.skip("a /tmp of its own needs root and unshare (util-linux)")
    code = (
        "import re\n"
        "from distmon.hooks import stacksignal\n"
        "def catastrophic():\n"
        "    return re.match(r'(a+)+$', 'a' * 40 + 'b')\n"
        "print(stacksignal.arm(), flush=True)\n"
        "catastrophic()\n"
    )
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    private_tmp = 'mount -t tmpfs tmpfs "$TMPDIR" && exec "$0" -c "$1"'
    command = [unshare, "--mount", "--propagation", "private", "sh", "-c", private_tmp, sys.executable, code]
    env = {**os.environ, "TMPDIR": str(private)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        path = process.stdout.readline().strip()
        assert path == str(stack_file(process.pid, 0)) and not Path(path).exists()  # not in this /tmp
        deadline = time.monotonic() + 30
        while (main := take_fault_stacks(process.pid).choose()) is None or main.frames[-1].func != "match":
            assert time.monotonic() < deadline, main
        assert [f.func for f in main.frames][-2:] == ["catastrophic", "match"]
    finally:
        process.kill()
        process.wait()
