"""The options of the commands that find a job's ranks from outside, with nothing in the job
changed: ``watch --find``, ``record --find``, ``relay --find`` and ``look``, which always finds."""

from __future__ import annotations

import argparse

from distmon.guards import values


def add_finding_arguments(parser: argparse.ArgumentParser, always: bool = False) -> None:
    if not always:
        parser.add_argument(
            "--find",
            action="store_true",
            help="find the ranks of a job running on this host without distmon (torchrun, srun, mpirun: "
            "RANK and WORLD_SIZE in their environment) and judge them from outside; nothing in the job changes",
        )
    parser.add_argument(
        "--pid",
        type=values.whole_option(1, 2**31 - 1),
        metavar="PID",
        help="the job of this process (a rank, or its launcher), where several jobs run on this host",
    )


def blind(args: argparse.Namespace) -> str | None:
    """Why ranks found from outside would be judged blind (no py-spy: no stack of theirs), if so."""
    from distmon.node.pyspy import executable

    if getattr(args, "find", True) and executable() is None:
        return (
            "py-spy is not installed: ranks found from outside cannot be judged without their stacks "
            "(pip install '.[stacks]' in distmon's checkout, or pip install py-spy)"
        )
    return None


def problem(args: argparse.Namespace) -> str | None:
    """A finding option given without ``--find``, in words."""
    if args.pid is not None and not getattr(args, "find", True):
        return "--pid picks the job --find finds: give --find too"
    return None
