"""SIGTERM's handler (distmon/hooks/termination.py) in a real process: the main thread waits for
the agent's last words only while an agent may yet send them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from distmon.hooks.termination import PATIENCE

SCRIPT = """
import os, signal, sys, time
from distmon.hooks.termination import TerminationWatch
watch = TerminationWatch()
assert watch.install()
if sys.argv[1] == "ended":
    watch.agent_ended.set()
print("installed", flush=True)
time.sleep(60)
"""


def _terminated(agent: str) -> float:
    """Seconds from SIGTERM to the process's death, which must be SIGTERM's."""
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, agent], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "installed\n"
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == -signal.SIGTERM, "it dies of SIGTERM, as without the hook"
        return time.monotonic() - sent
    finally:
        process.kill()


def test_with_its_agent_ended_a_rank_dies_of_sigterm_at_once() -> None:
    assert _terminated("ended") < PATIENCE, "nobody is left to send last words: no wait"


def test_while_its_agent_may_yet_speak_the_main_thread_gives_it_its_patience() -> None:
    assert _terminated("running") >= PATIENCE, "died before the agent could send its last words"
