"""The checked-in vectors (made by Artemis 2.44.0's own classes) agree with the hex in the protocol notes §16.

Fast and offline: it only reads fixtures/vectors/*.jsonl.  Regenerate the vectors with
``cck artemis vectors``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "vectors"
NODE = b"11111111-2222-3333-4444-555555555555".hex()
UNIQUE = b"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".hex()
NETTY = b"org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory".hex()
TC = (
    "00000005 006e 0065 0074 0074 0079 0000004a 004a" + NETTY + "00000002"
    "00000004 0068 006f 0073 0074 03 00000009 0009 6c6f63616c686f7374"
    "00000004 0070 006f 0072 0074 01 0000f0b0"
)
XID = "00001234 00000002 0102 00000003 090807"
SESS_RESP_V3 = (
    "00000045 f2 000000000000000a ff ff 00 00000000 0000000000000000 00 01 00000004 61003100"
    "01 00000004 71003100 ff 00 00 01 ffffffff" + "00" * 16 + "ff 00"
)

# (file, vector id, hex from the notes §16; spaces are ignored)
NOTES: list[tuple[str, str, str]] = [
    ("packets", "PING/ttl-60000@136", "00000011 0a 0000000000000000 000000000000ea60"),
    ("packets", "SUBSCRIBE_TOPOLOGY_V2/client-136@136", "0000000e 71 0000000000000000 00 00000088"),
    (
        "packets",
        "CLUSTER_TOPOLOGY_V4/non-clustered-server@136",
        "00000045 ef 0000000000000000 00 00000024 0024" + NODE + "0000018bcfe56800 00 00 ff 00 00 00000088",
    ),
    (
        "packets",
        "CREATESESSION_V2/notes@136",
        "00000051 ee 0000000000000001 00000006 0073 0065 0073 0073 002d 0031 000000000000000a 00000088"
        "01 00000005 0067 0075 0065 0073 0074 01 00000005 0067 0075 "
        "0065 0073 0074 00019000 00 ff ff ffffffff 00 00 00",
    ),
    (
        "packets",
        "CREATESESSION/notes@136",
        "00000050 1e 0000000000000001 00000006 0073 0065 0073 0073 002d 0031 000000000000000a 00000088"
        "01 00000005 0067 0075 0065 0073 0074 01 00000005 0067 "
        "0075 0065 0073 0074 00019000 00 ff ff ffffffff 00 00",
    ),
    ("packets", "CREATESESSION_RESP/136@136", "0000000d 1f 0000000000000001 00000088"),
    (
        "packets",
        "REATTACH_SESSION/notes@136",
        "0000001d 20 0000000000000001 00000006 0073006500730073002d0031 00000005",
    ),
    ("packets", "REATTACH_SESSION_RESP/reattached@136", "0000000e 21 0000000000000001 00000003 ff"),
    ("packets", "EXCEPTION/v1-incompatible@129", "0000000e 14 0000000000000001 0000006c 00"),
    ("packets", "DISCONNECT_V3/shutdown@136", "00000015 ed 0000000000000000 01 00000004 6e003100 04 00 00"),
    ("packets", "DISCONNECT/n1@136", "00000012 0b 0000000000000000 01 00000004 6e003100"),
    ("packets", "DISCONNECT_V2/n1-null@136", "00000013 7c 0000000000000000 01 00000004 6e003100 00"),
    ("packets", "NULL_RESPONSE/v2-corr-minus-1@136", "00000011 15 000000000000000a ffffffffffffffff"),
    (
        "packets",
        "EXCEPTION/v2-queue-does-not-exist@136",
        "00000022 14 000000000000000a 00000064 01 00000004 006e006f00200071 0000000000000005",
    ),
    ("packets", "PACKETS_CONFIRMED/7@136", "0000000d 16 000000000000000a 00000007"),
    (
        "packets",
        "CREATE_ADDRESS/anycast@136",
        "00000018 f5 000000000000000a 00000004 61003100 00000001 01 ff 00",
    ),
    (
        "packets",
        "CREATE_QUEUE_V2/notes@136",
        "00000033 f4 000000000000000a 00000004 61003100 00000004 71003100 00 ff 00 ff 00 01 ffffffff 00" + "00" * 15,
    ),
    ("packets", "DELETE_QUEUE/q1@136", "00000011 23 000000000000000a 00000004 71003100"),
    (
        "packets",
        "SESS_CREATECONSUMER/notes@136",
        "00000020 28 000000000000000a 0000000000000000 00000004 71003100 00 00 ff 00000004",
    ),
    ("packets", "SESS_FLOWTOKEN/1mib@136", "00000015 46 000000000000000a 0000000000000000 00100000"),
    (
        "packets",
        "SESS_ACKNOWLEDGE/notes@136",
        "0000001a 29 000000000000000a 0000000000000000 000000000000002a 00",
    ),
    (
        "packets",
        "SESS_INDIVIDUAL_ACKNOWLEDGE/notes@136",
        "0000001a 51 000000000000000a 0000000000000000 000000000000002a ff",
    ),
    ("packets", "SESS_COMMIT/v2-corr-minus-2@136", "00000011 2b 000000000000000a fffffffffffffffe"),
    ("packets", "SESS_ROLLBACK/false@136", "0000000a 2c 000000000000000a 00"),
    ("packets", "SESS_START/empty@136", "00000009 43 000000000000000a"),
    ("packets", "SESS_CLOSE/empty@136", "00000009 45 000000000000000a"),
    ("packets", "SESS_QUEUEQUERY/q1@136", "00000011 2d 000000000000000a 00000004 71003100"),
    ("packets", "SESS_BINDINGQUERY/a1@136", "00000011 31 000000000000000a 00000004 61003100"),
    (
        "packets",
        "SESS_PRODUCER_REQUEST_CREDITS/notes@136",
        "00000015 4f 000000000000000a 00008000 00000004 61003100",
    ),
    ("packets", "SESS_PRODUCER_CREDITS/notes@136", "00000015 50 000000000000000a 00008000 00000004 61003100"),
    (
        "packets",
        "SESS_ADD_METADATA2/confirm@136",
        "00000016 69 000000000000000a 00000001 006b 00000001 0076 ff",
    ),
    ("packets", "CREATE_PRODUCER/notes@136", "00000016 ec 000000000000000a 00000001 01 00000004 61003100"),
    ("packets", "REMOVE_PRODUCER/notes@136", "0000000d eb 000000000000000a 00000001"),
    ("packets", "SESS_CONSUMER_CLOSE/0@136", "00000011 4a 000000000000000a 0000000000000000"),
    ("packets", "SESS_QUEUEQUERY_RESP_V3/notes@136", SESS_RESP_V3),
    (
        "packets",
        "SESS_BINDINGQUERY_RESP_V5/notes@136",
        "00000025 ea 000000000000000a ff 00000001 00000004 71003100 ff ff 00 ffffffff 00 00 00 00 00 00 00 ff",
    ),
    ("packets", "SESS_XA_START/notes@136", "0000001a 33 000000000000000a" + XID),
    ("packets", "SESS_XA_END/success@136", "0000001b 34 000000000000000a" + XID + "00"),
    ("packets", "SESS_XA_PREPARE/notes@136", "0000001a 36 000000000000000a" + XID),
    ("packets", "SESS_XA_COMMIT/two-phase@136", "0000001b 35 000000000000000a" + XID + "00"),
    ("packets", "SESS_XA_RESP/v1-ok@129", "0000000f 37 000000000000000a 00 00000000 00"),
    (
        "packets",
        "SESS_XA_RESP/v1-error-nota@129",
        "00000015 37 000000000000000a ff fffffffc 01 00000001 0078",
    ),
    ("packets", "SESS_XA_RESP/v2-ok@136", "00000017 37 000000000000000a 00 00000000 00 fffffffffffffffd"),
    ("packets", "SESS_XA_INDOUBT_XIDS_RESP/one@136", "0000001e 3e 000000000000000a 00000001" + XID),
    ("packets", "SESS_XA_SET_TIMEOUT/60@136", "0000000d 3f 000000000000000a 0000003c"),
    ("packets", "SESS_XA_GET_TIMEOUT_RESP/60@136", "0000000d 42 000000000000000a 0000003c"),
    (
        "packets",
        "SESS_SEND/text-durable@136",
        "00000058 47 000000000000000a 00000016 01 00000004 68006900 "
        "0000000000000000 01 00000004 61003100 00 03 01"
        "0000000000000000 0000018bcfe56800 04 01 00000001 00000002 "
        "6e00 06 00000007 ff fffffffffffffffe 00000001",
    ),
    (
        "packets",
        "SESS_SEND/empty-body@136",
        "00000040 47 000000000000000a 0000000d 0000000000000000 "
        "01 00000004 61003100 00 00 00 0000000000000000"
        "0000000000000000 04 00 00 0000000000000000 00000000",
    ),
    (
        "packets",
        "SESS_RECEIVE_MSG/notes@136",
        "00000048 4b 000000000000000a 00000016 01 00000004 68006900 "
        "00000000000004d2 01 00000004 61003100 00 03 01"
        "0000000000000000 0000018bcfe56800 04 00 0000000000000000 00000001",
    ),
    (
        "structures",
        "message/untouched-body-quirk",
        "00000011 00000000 0000000000000000 01 00000004 61003100 00 00 00 0000000000000000 0000000000000000 04 00",
    ),
    ("structures", "transport_configuration/notes", TC),
    (
        "structures",
        "discovery/one-connector",
        "00000024 0024" + NODE + "00000024 0024" + UNIQUE + "00000001" + TC,
    ),
    ("typed_properties", "typed_properties/empty", "00"),
    ("typed_properties", "typed_properties/boolean-true", "01 00000001 00000002 6200 02 01"),
    ("typed_properties", "typed_properties/byte", "01 00000001 00000002 7900 03 05"),
    ("typed_properties", "typed_properties/bytes", "01 00000001 00000002 7800 04 00000002 0102"),
    ("typed_properties", "typed_properties/short", "01 00000001 00000002 7300 05 0006"),
    ("typed_properties", "typed_properties/long", "01 00000001 00000002 6c00 07 0000000000000008"),
    ("typed_properties", "typed_properties/float", "01 00000001 00000002 6600 08 3fc00000"),
    ("typed_properties", "typed_properties/double", "01 00000001 00000002 6400 09 4004000000000000"),
    ("typed_properties", "typed_properties/string", "01 00000001 00000002 7400 0a 00000004 68006900"),
    ("typed_properties", "typed_properties/char", "01 00000001 00000002 6300 0b 005a"),
    ("typed_properties", "typed_properties/null", "01 00000001 00000002 6e00 00"),
    ("primitives", "string/abc", "00000003 0061 0062 0063"),
    ("primitives", "simple_string/abc", "00000006 6100 6200 6300"),
    ("primitives", "string/non-ascii", "0000000b 000d 68 c3a9 6c 6c 6f 20 77 c3b6 72 6c 64"),
    ("primitives", "string/8", "00000008 0031 0032 0033 0034 0035 0036 0037 0038"),
    ("primitives", "string/9", "00000009 0009 313233343536373839"),
    ("primitives", "string/4094", "00000ffe 0ffe" + "61" * 4094),
    ("primitives", "string/4095", "00000fff 00001ffe" + "6100" * 4095),
    ("primitives", "string/nul-surrogate-pair", "0000000b 000f 00 6162636465666768 eda0bd edb880"),
    ("primitives", "nullable_string/null", "00"),
    ("primitives", "nullable_string/1", "01 00000001 0061"),
    ("primitives", "bool/true", "ff"),
    ("primitives", "bool/false", "00"),
]


def _load(kind: str) -> dict[str, dict[str, Any]]:
    path = VECTORS / f"{kind}.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {str(r["id"]): r for r in records}


@pytest.mark.parametrize(("kind", "vector_id", "notes_hex"), NOTES, ids=[n[1] for n in NOTES])
def test_vector_matches_notes(kind: str, vector_id: str, notes_hex: str) -> None:
    vectors = _load(kind)
    assert vector_id in vectors, f"{vector_id} missing from {kind}.jsonl"
    assert vectors[vector_id]["hex"] == notes_hex.replace(" ", "").lower()


def test_manifest_counts_match_files() -> None:
    manifest = json.loads((VECTORS / "manifest.json").read_text(encoding="utf-8"))
    for name, count in manifest["counts"].items():
        lines = [line for line in (VECTORS / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        assert len(lines) == count, name
    assert manifest["packet_types_missing"] == []
