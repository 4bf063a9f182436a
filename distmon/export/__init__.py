"""What the monitor hands to other tools: Prometheus metrics while it runs, an HTML page
of a recording afterwards. Watch side: never imports torch."""
