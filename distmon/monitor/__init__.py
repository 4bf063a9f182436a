"""The monitor side: receive rank reports, keep state, detect, record. Never imports torch."""
