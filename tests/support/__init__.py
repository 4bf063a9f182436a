"""Support code shared by the tests, the benchmarks and the screenshot script; never shipped."""
