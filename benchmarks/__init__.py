"""Benchmarks of the engine and the served app: `python -m benchmarks` lists them; docs/benchmarks.md explains."""
