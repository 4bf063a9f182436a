"""The options of the commands that find a job's ranks from outside, with nothing in the job
changed: ``watch --find``, ``record --find``, ``relay --find`` and ``look``, which always finds."""

from __future__ import annotations

import argparse

from distmon.guards import values


def add_finding_arguments(parser: argparse.ArgumentParser, always: bool = False, reach: bool = True) -> None:
    """``--find`` (unless it ``always`` finds), ``--pid``, and where it may ``reach`` other
    nodes, the options that say which."""
    if not always:
        parser.add_argument(
            "--find",
            action="store_true",
            help="find the ranks of a job running without distmon (torchrun, srun, mpirun, mp.spawn, Lightning, "
            "a launcher of its own) and judge them from outside; nothing in the job changes",
        )
    parser.add_argument(
        "--pid",
        type=values.whole_option(1, 2**31 - 1),
        metavar="PID",
        help="the job of this process (a rank, or its launcher), where several jobs run on this host",
    )
    if reach:
        _add_reach_arguments(parser)


def _add_reach_arguments(parser: argparse.ArgumentParser) -> None:
    reach = parser.add_argument_group(
        "reaching the job's other nodes",
        "by default, the nodes the job found on this host says it runs on (its launcher, its store); "
        "each node needs distmon and py-spy in the job's Python",
    )
    reach.add_argument(
        "--slurm",
        nargs="?",
        const="",
        metavar="JOBID",
        help="every node of this Slurm job (default: the allocation this runs in, or your one running job), "
        "reached as a step of the job (srun --overlap): no ssh needed",
    )
    reach.add_argument(
        "--hosts",
        metavar="HOST[,HOST...]",
        help="these nodes, over ssh (batch mode, your ssh config; $DISTMON_SSH for another ssh command); "
        "Slurm's form node[01-04] too",
    )
    reach.add_argument("--hostfile", metavar="FILE", help="the nodes listed in FILE, one a line (an MPI hostfile)")
    reach.add_argument(
        "--here",
        action="store_true",
        help="look on this host only, even where the job runs on other nodes too",
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
    """A finding option given without ``--find``, or options that disagree, in words."""
    finds = getattr(args, "find", True)
    for option in ("pid", "slurm", "hosts", "hostfile"):
        if getattr(args, option, None) is not None and not finds:
            return f"--{option} goes with --find: give --find too"
    here = getattr(args, "here", False)
    if here and not finds:
        return "--here goes with --find: give --find too"
    if here and (args.slurm is not None or args.hosts is not None or args.hostfile is not None):
        return "--here looks on this host only: it goes with neither --slurm, --hosts nor --hostfile"
    return None
