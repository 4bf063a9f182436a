"""What distmon does about alerts: notify people, keep the evidence, end a hung job. Watch side: never imports torch."""
