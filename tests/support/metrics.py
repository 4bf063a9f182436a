"""Reading distmon's Prometheus endpoint as Prometheus parses it."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int, timeout: float = 10.0) -> dict[str, list]:
    """Samples by name, retried until the server answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples
