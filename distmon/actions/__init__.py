"""What distmon does about alerts: notify people, keep the evidence, end a hung job. It
imports the monitor, the wire, the channel and py-spy's wrapper; never torch."""
