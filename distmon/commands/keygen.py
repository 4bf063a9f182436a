"""``distmon keygen FILE``: write a job key file (mode 0600), never over an existing one.

The monitor (``--key-file`` or ``DISTMON_KEY_FILE``) and every rank (``DISTMON_KEY_FILE``)
read the same file; see :mod:`distmon.keys`.
"""

from __future__ import annotations

import argparse
import sys

from distmon import keys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="where to write the key (must not exist)")


def run(args: argparse.Namespace) -> int:
    try:
        keys.generate(args.file)
    except keys.KeyFileError as e:
        print(f"distmon keygen: {e}", file=sys.stderr)
        return 2
    print(
        f"distmon keygen: wrote {args.file} (mode 0600). Give the monitor --key-file {args.file} "
        f"and every rank {keys.ENV}={args.file}; keep it from everyone else.",
        file=sys.stderr,
    )
    return 0
