"""Benchmarks: figures printed, never pass/fail (`python -m benchmarks`)."""
