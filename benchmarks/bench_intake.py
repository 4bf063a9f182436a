"""The monitor's CPU per report taken in, in this process alone: no sockets, no relays or
senders on the cores, so the figure is the monitor's own work and nothing else's.

    .venv/bin/python benchmarks/bench_intake.py [--ranks 131072] [--seconds 5] [--per-relay N] [--json]

Seconds of a healthy job of N ranks (``bench_soak.py``'s, their clocks and counters moved on)
arrive as four relays send them, in batches of 10,000 (``distmon relay``'s ``--batch``), or
with ``--per-relay 8`` as a relay per node of eight ranks sends them (16,384 batches a second
at 131,072 ranks, merged by the monitor's Session before it takes them in), two ways: as
columns (what relays send, only news whole: after the first second, none), and as frames
(what relays sent before columns, ``distmon-batch/1``, which the monitor still takes).
Each batch is decoded as the Receiver decodes it and taken in as the Session takes it, then
the detector ticks, with and without a recording. The first second (every rank new) is left
out. With ``--json`` the last line is one JSON object: per way and recording, ``us_per_report``
(process CPU, over the seconds after the first), ``recording_bytes_per_report`` (over all of
them, the first's whole reports included), and ``load``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench_soak import templates

from distmon.cli import relax_gc
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import ALONE
from distmon.node.news import News
from distmon.wire.arrays import parse
from distmon.wire.column_batch import ColumnBatch, column_frames, decode_columns
from distmon.wire.sockets import Batch, Relay, batch_frames, decode_batch

BATCH = 10_000


def wire_seconds(ranks: int, seconds: int, columns: bool, per_relay: int) -> list[list[list[bytes]]]:
    """Per second, the messages the relays send (each a list of ZeroMQ frames)."""
    healthy, _, _ = templates(ranks)
    news: dict[int, News] = {}
    out = []
    for k in range(seconds):
        now = healthy[0].second + k
        messages = []
        for i, template in enumerate(healthy):
            frames = template.at(now, now - template.second, template.ran + k)
            size = per_relay or BATCH
            for first in range(0, len(frames), size):
                batch = frames.slice(first, min(len(frames), first + size))
                if per_relay:  # a relay of its own
                    node = i * len(frames) // size + first // size
                    batch.relays = [Relay(f"node{node:05d}:1", f"node{node:05d}")]
                else:
                    node = i
                if columns:
                    parsed = parse(batch)
                    sent = news.setdefault(node, News(seed=node)).choose(parsed, now)
                    messages.append(column_frames(ColumnBatch.of(parsed, sent, batch.relays)))
                else:
                    messages.append(batch_frames(batch))
        out.append(messages)
    return out


def measure(seconds: list[list[list[bytes]]], columns: bool, record: bool, tmp: Path) -> dict[str, float]:
    out = tmp / f"{columns}-{record}.distmon"
    monitor = Monitor(recorder=RecordingWriter(str(out)) if record else None)
    start, cpu, taken, recorded = 1e9, 0.0, 0, 0
    for k, messages in enumerate(seconds):
        began = time.process_time()
        now = start + k + 0.5
        batches = [decode_columns(m) if columns else decode_batch(m) for m in messages]
        frames = sum(len(b) for b in batches)
        if len(batches[0]) < ALONE:  # as the Session merges small batches
            batches = [ColumnBatch.merged(batches) if columns else Batch.merged(batches)]  # type: ignore[arg-type]
        for batch in batches:
            monitor.ingest_batch(batch, now)
        monitor.tick(start + k + 1)
        recorded += frames
        if k:  # the first second takes every rank in anew
            cpu += time.process_time() - began
            taken += frames
    monitor.close()
    return {
        "us_per_report": round(cpu / taken * 1e6, 3),
        "recording_bytes_per_report": round(out.stat().st_size / recorded, 1) if record else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=131_072)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--per-relay", type=int, default=0, help="ranks a relay: one relay a node (default: 4 relays)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    relax_gc()
    load = os.getloadavg()[0]
    result: dict[str, object] = {"ranks": args.ranks, "per_relay": args.per_relay or "4 relays"}
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        for columns in (True, False):
            seconds = wire_seconds(args.ranks, args.seconds, columns, args.per_relay)
            for record in (False, True):
                way = f"{'columns' if columns else 'frames'}{', recorded' if record else ''}"
                result[way] = measure(seconds, columns, record, Path(tmp))
                print(f"| {way} | {result[way]} |", flush=True)
    result["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
