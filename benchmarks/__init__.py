"""Benchmarks: the scaling suite against torch SDPA and peer implementations, and the interactive-path timings."""
