"""Artemis's packet vectors (``fixtures/vectors/packets.jsonl`` and the cross-version file) by ID or packet name, for
the codec tests that compare a frame built in Python with the bytes Artemis's own classes wrote."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CROSS_VERSION_VECTORS", "PACKET_VECTORS", "artemis_bytes", "artemis_vectors"]

PACKET_VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors" / "packets.jsonl"
CROSS_VERSION_VECTORS = PACKET_VECTORS.with_name("packets_cross_version.jsonl")


@cache
def _records(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


@cache
def _by_id() -> dict[str, bytes]:
    return {record["id"]: bytes.fromhex(record["hex"]) for record in _records(PACKET_VECTORS)}


def artemis_vectors(name: str, *, cross_version: bool = False) -> list[dict[str, Any]]:
    """Every vector of packet ``name`` (e.g. ``"PING"``), as recorded: ``id``, ``version``, ``channel``, ``fields``,
    ``hex`` (and ``written_at_version`` in the cross-version file)."""
    return [r for r in _records(CROSS_VERSION_VECTORS if cross_version else PACKET_VECTORS) if r["name"] == name]


def artemis_bytes(vector_id: str) -> bytes:
    """The frame of vector ``vector_id`` (``NAME/label@version``); a LookupError naming it when there is none."""
    try:
        return _by_id()[vector_id]
    except KeyError:
        raise LookupError(f"no packet vector {vector_id!r} in {PACKET_VECTORS}") from None
