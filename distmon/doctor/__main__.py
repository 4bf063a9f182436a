"""``python -m distmon.doctor``: the same as ``distmon doctor``, for use under torchrun."""

import sys

from distmon.cli import main

sys.exit(main(["doctor", *sys.argv[1:]]))
