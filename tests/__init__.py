"""distmon's tests: a package, so that every test imports its helpers as ``tests.support``."""
