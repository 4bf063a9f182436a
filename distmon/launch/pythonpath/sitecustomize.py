"""Put first on a job's PYTHONPATH by ``distmon run``, so every Python process of the job runs
it at start-up: it runs the ``sitecustomize`` it shadows, if any, then lets
:mod:`distmon.launch.autoattach` decide whether this process is a rank to monitor."""

import importlib.machinery
import importlib.util
import os
import sys


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _attach_in_ranks() -> None:
    from distmon.launch.autoattach import install

    install()


for _step in (_run_shadowed, _attach_in_ranks):
    try:
        _step()
    except Exception as _error:  # what site.py does with a failing sitecustomize: say it, go on
        print(f"distmon: sitecustomize: {type(_error).__name__}: {_error}", file=sys.stderr)
