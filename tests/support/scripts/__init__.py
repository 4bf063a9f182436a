"""Scripts the real-rank tests run under torchrun besides the examples; a test may import one
for the numbers it promises."""
