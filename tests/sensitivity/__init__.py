"""The kit's own seeded faults ("mutants") and the runner that measures how many of them the conformance cases
kill (docs/sensitivity.md): ``python -m tests.sensitivity [--only NAME ...] [--smoke] [--out FILE]``."""
