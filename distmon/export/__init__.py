"""What the monitor hands to other tools: Prometheus metrics while it runs, an HTML page
of a recording afterwards, its text report. It formats the monitor's facts and imports the
monitor and the wire; never torch."""
