"""The terminal UI under Pilot: the app on recorded and simulated streams, and its snapshots."""
