"""What distmon does about alerts: notify people, keep the evidence, end a hung job. It
imports the monitor, the wire (its sockets too) and py-spy's wrapper; never torch."""
