"""``distmon report FILE``: the post-mortem of a recorded run, first cause on top.

``--json`` prints the alerts as a JSON list of objects with exactly the fields
``kind, severity, ranks, t, summary, detail``, in the order they were raised. ``--html OUT``
writes the same post-mortem with plots as one self-contained page (see
:mod:`distmon.export.html`).

A file that is no recording, or of which nothing could be read, is one line on stderr and
exit code 2; damage inside a recording (records skipped, a file cut mid-record) is one line
on stderr before the report.
"""

from __future__ import annotations

import argparse
import json
import sys

from distmon.export.plain import render
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import RecordingError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a recording made by distmon record or distmon watch --record")
    parser.add_argument("--json", action="store_true", help="print the alerts as JSON for other tools")
    parser.add_argument("--html", metavar="OUT", help="also write the post-mortem with plots to OUT, one offline page")


def run(args: argparse.Namespace) -> int:
    try:
        pm = load_recording(args.file)
    except RecordingError as e:
        print(f"distmon report: {e}", file=sys.stderr)
        return 2
    if pm.trouble is not None:
        print(f"distmon report: {pm.trouble}", file=sys.stderr)
    text = render(pm)
    page = None
    if args.html:  # before anything is printed: without plotly, one line and nothing else
        from distmon.export.html import MissingPlotly, render_page

        try:
            page = render_page(pm, args.file, text)
        except MissingPlotly as e:
            print(f"distmon report: {e}", file=sys.stderr)
            return 2
    if args.json:
        json.dump([a.to_json() for a in pm.alerts], sys.stdout, indent=2)
        print()
    else:
        print(text)
    return _write_html(page, args.html) if page is not None else 0


def _write_html(page: str, out: str) -> int:
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        print(f"distmon report: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"distmon report: wrote {out} ({len(page) / 1e6:.1f} MB, opens offline)", file=sys.stderr)
    return 0
