"""The job as the monitor knows it: its facts, each defined once (columns over the ranks,
a rank's view, how the job ended, the thresholds, alerts and their words). Imports nothing
of the monitor above it: every rule, reader and surface formats these facts."""
