"""The post-mortem of a job that ran without distmon: its Flight Recorder dumps and job logs,
read into the reports its ranks would have sent, judged by the live monitor, rendered.

It sits beside ``tui`` and ``export``: it may import the monitor, the wire and the
Flight Recorder reader, never torch.
"""
