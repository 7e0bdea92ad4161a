"""Benchmarks of session-awareness against the plain database driver, run by `make bench`.

Every figure is a ratio against a baseline measured in the same run, interleaved round by
round, because the machines these run on are shared and noisy. See `bench/README.md`.
"""
