"""Fast tests: the logic on synthetic or recorded streams, dumps and logs; no real rank."""
