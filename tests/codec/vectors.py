"""Artemis's packet vectors (``fixtures/vectors/packets.jsonl``) by ID, for the codec tests that compare a frame
built in Python with the bytes Artemis's own classes wrote."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

__all__ = ["PACKET_VECTORS", "artemis_bytes"]

PACKET_VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors" / "packets.jsonl"


@cache
def _by_id() -> dict[str, bytes]:
    records = (json.loads(line) for line in PACKET_VECTORS.read_text(encoding="utf-8").splitlines() if line.strip())
    return {record["id"]: bytes.fromhex(record["hex"]) for record in records}


def artemis_bytes(vector_id: str) -> bytes:
    """The frame of vector ``vector_id`` (``NAME/label@version``); a LookupError naming it when there is none."""
    try:
        return _by_id()[vector_id]
    except KeyError:
        raise LookupError(f"no packet vector {vector_id!r} in {PACKET_VECTORS}") from None
