"""Benchmarks of the codec (run benchmarks/codec_bench.py)."""
