"""The post-mortem of a job that ran without distmon: its Flight Recorder dumps and job logs,
read into the reports its ranks would have sent, judged by the live monitor, rendered.

It sits beside ``export`` and ``actions``, under the commands: it imports the monitor, the
wire, the channel and the small shared modules (the Flight Recorder reader above all), never
torch.
"""
