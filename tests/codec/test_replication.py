"""Replication packets (channel 2) beyond the generic vector test (test_artemis_vectors): packets built in Python from
each vector's fields are the bytes Artemis wrote; REPLICATION_APPEND's operation is a boolean below protocol 131 (0
included) and a byte from 131 on; REPLICATION_START_FINISH_SYNC's trailer is on the wire or not, as a whole; a
truncated frame is refused with the offset where it ran out."""

from __future__ import annotations

from typing import Any

import pytest

from cck.codec import (
    AddOperationType,
    EncodeError,
    MalformedFrame,
    Packet,
    PacketType,
    PrimaryStopping,
    ReplicationAddMessage,
    ReplicationPrimaryIsStoppingMessage,
    ReplicationStartSyncMessage,
    SyncDataType,
    decode_frame,
    encode_packet,
    packet_class,
    raw,
)

from .vectors import artemis_bytes, artemis_vectors

NODE = "11111111-2222-3333-4444-555555555555"
REPLICATION = 2  # the channel
HEADER = 13
NAMES = ("REPLICATION_APPEND", "REPLICATION_START_FINISH_SYNC", "REPLICATION_SCHEDULED_FAILOVER")
VECTORS = [v for name in NAMES for v in artemis_vectors(name)]


def _packet(name: str, fields: dict[str, Any]) -> Packet:
    """The packet a vector's JSON fields describe, built the way a caller builds it."""
    values = dict(fields)
    if "record_data" in values:
        values["record_data"] = bytes.fromhex(values["record_data"])
    if values.get("ids") is not None:
        values["ids"] = tuple(values["ids"])
    cls = packet_class(PacketType[name])
    assert cls is not None
    return cls(**values)


def test_every_replication_packet_has_vectors_on_both_sides_of_2_18() -> None:
    for name in NAMES:
        versions = {v["version"] for v in artemis_vectors(name)}
        assert {130, 131, 136} <= versions, name


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_built_in_python_is_artemis_bytes(vector: dict[str, Any]) -> None:
    packet = _packet(vector["name"], vector["fields"])
    frame = bytes.fromhex(vector["hex"])
    assert encode_packet(packet, vector["channel"], version=vector["version"]) == frame
    decoded = decode_frame(frame, version=vector["version"])
    assert decoded.channel_id == REPLICATION
    assert decoded.packet == packet


# ------------------------------------------------------------------------------------------------ REPLICATION_APPEND

ADD_MESSAGE = ReplicationAddMessage(
    journal_id=1, operation=AddOperationType.ADD, record_id=7, journal_record_type=45,
    record_data=bytes.fromhex("0a0b0c0d0e0f"),
)
UPDATE = ReplicationAddMessage(
    journal_id=1, operation=AddOperationType.UPDATE, record_id=7, journal_record_type=34,
    record_data=bytes.fromhex("000000000000000700000002"),
)
OPERATION_AT = HEADER + 1  # after journal_id


@pytest.mark.parametrize(
    ("version", "add_byte", "update_byte"),
    [(0, 0x00, 0xFF), (130, 0x00, 0xFF), (131, 0x01, 0x00), (136, 0x01, 0x00)],
)
def test_append_operation_is_a_boolean_below_131_and_a_byte_from_131(version: int, add_byte: int,
                                                                      update_byte: int) -> None:
    add = encode_packet(ADD_MESSAGE, REPLICATION, version=version)
    update = encode_packet(UPDATE, REPLICATION, version=version)
    assert add == artemis_bytes(f"REPLICATION_APPEND/add-message@{version}")
    assert update == artemis_bytes(f"REPLICATION_APPEND/update-delivery-count@{version}")
    assert (add[OPERATION_AT], update[OPERATION_AT]) == (add_byte, update_byte)
    assert decode_frame(add, version=version).packet == ADD_MESSAGE
    assert decode_frame(update, version=version).packet == UPDATE


def test_append_read_on_the_wrong_side_of_131_changes_meaning() -> None:
    # Artemis 2.18.0 to 2.23.x wrote the byte to every peer; a 2.17 backup read it as the boolean.  The codec keeps
    # what the bytes say at the version it is given: 0xFF is no operation code (Artemis's toOperation makes ADD of it).
    old_add = decode_frame(artemis_bytes("REPLICATION_APPEND/add-message@130"), version=131).packet
    old_update = decode_frame(artemis_bytes("REPLICATION_APPEND/update-delivery-count@130"), version=131).packet
    new_update = decode_frame(artemis_bytes("REPLICATION_APPEND/update-delivery-count@131"), version=130).packet
    new_add = decode_frame(artemis_bytes("REPLICATION_APPEND/add-message@131"), version=130).packet
    assert isinstance(old_add, ReplicationAddMessage)
    assert isinstance(old_update, ReplicationAddMessage)
    assert isinstance(new_update, ReplicationAddMessage)
    assert isinstance(new_add, ReplicationAddMessage)
    assert (old_add.operation, old_update.operation) == (AddOperationType.UPDATE, -1)
    assert (new_update.operation, new_add.operation) == (AddOperationType.ADD, AddOperationType.UPDATE)


def test_append_boolean_reads_any_non_zero_byte_as_update() -> None:
    frame = bytearray(artemis_bytes("REPLICATION_APPEND/update-delivery-count@130"))
    frame[OPERATION_AT] = 0x01
    assert decode_frame(bytes(frame), version=130).packet == UPDATE


@pytest.mark.parametrize("version", [0, 121, 130])
def test_append_event_has_no_boolean_form(version: int) -> None:
    event = ReplicationAddMessage(1, AddOperationType.EVENT, 9, 40, (3).to_bytes(8, "big"))
    with pytest.raises(EncodeError, match="no form before protocol 131"):
        encode_packet(event, REPLICATION, version=version)
    assert encode_packet(event, REPLICATION, version=131) == artemis_bytes("REPLICATION_APPEND/event@131")


def test_append_keeps_an_operation_code_artemis_does_not_know() -> None:
    packet = ReplicationAddMessage(1, 5, 1, 45, b"")
    assert decode_frame(encode_packet(packet, REPLICATION)).packet == packet


# ------------------------------------------------------------------------------ REPLICATION_START_FINISH_SYNC

def test_start_sync_built_in_python_is_artemis_bytes() -> None:
    bindings = ReplicationStartSyncMessage(
        synchronization_finished=False, allows_auto_fail_back=True, node_id=NODE,
        data_type=SyncDataType.JournalBindings, ids=(2, 3),
    )
    finished = ReplicationStartSyncMessage(True, False, NODE, SyncDataType.ActivationSequence, (4,))
    for version in (130, 131, 136):  # Artemis 2.44.0 writes the trailer at every version
        assert encode_packet(bindings, REPLICATION, version=version) == artemis_bytes(
            f"REPLICATION_START_FINISH_SYNC/journal-bindings@{version}")
        assert encode_packet(finished, REPLICATION, version=version) == artemis_bytes(
            f"REPLICATION_START_FINISH_SYNC/finished-activation-sequence@{version}")


@pytest.mark.parametrize("vector", artemis_vectors("REPLICATION_START_FINISH_SYNC", cross_version=True),
                         ids=lambda v: v["id"])
def test_start_sync_without_trailer_is_the_pre_2_18_end(vector: dict[str, Any]) -> None:
    # Written as Artemis 2.17 and earlier wrote the end of synchronisation; read by Artemis 2.44.0's decoder.
    frame = bytes.fromhex(vector["hex"])
    packet = decode_frame(frame, version=vector["version"]).packet
    assert packet == ReplicationStartSyncMessage(True, False, NODE, None, None)
    assert (vector["fields"]["data_type"], vector["fields"]["ids"]) == (None, None)
    for version in (vector["written_at_version"], vector["version"]):
        assert encode_packet(packet, REPLICATION, version=version) == frame


def test_start_sync_without_its_whole_trailer_is_the_trailerless_form() -> None:
    full = ReplicationStartSyncMessage(False, True, NODE, SyncDataType.JournalBindings, (2, 3))
    trailer = 1 + 4 + 2 * 8
    frame = raw.truncated(full, trailer, channel_id=REPLICATION)
    assert decode_frame(frame).packet == ReplicationStartSyncMessage(False, True, NODE, None, None)


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (ReplicationStartSyncMessage(True, False, NODE, None, (4,)), "travel together"),
        (ReplicationStartSyncMessage(True, False, NODE, SyncDataType.ActivationSequence, None), "travel together"),
    ],
    ids=["ids-without-type", "type-without-ids"],
)
def test_start_sync_encoder_refuses_half_a_trailer(packet: ReplicationStartSyncMessage, message: str) -> None:
    with pytest.raises(EncodeError, match=message):
        encode_packet(packet, REPLICATION)


# ---------------------------------------------------------------------------- REPLICATION_SCHEDULED_FAILOVER

@pytest.mark.parametrize("stopping", list(PrimaryStopping), ids=lambda s: s.name)
def test_scheduled_failover_codes_are_artemis_bytes(stopping: PrimaryStopping) -> None:
    frame = artemis_bytes(f"REPLICATION_SCHEDULED_FAILOVER/{stopping.name.lower().replace('_', '-')}@136")
    assert encode_packet(ReplicationPrimaryIsStoppingMessage(stopping), REPLICATION) == frame
    assert decode_frame(frame).packet == ReplicationPrimaryIsStoppingMessage(int(stopping))


def test_scheduled_failover_keeps_a_code_artemis_reads_as_fail_over() -> None:
    packet = ReplicationPrimaryIsStoppingMessage(7)
    assert decode_frame(encode_packet(packet, REPLICATION)).packet == packet


# ------------------------------------------------------------------------------------------------ truncation

@pytest.mark.parametrize(
    ("packet", "version", "cut", "offset", "field"),
    [
        # journal_id, operation, record_id, journal_record_type, the i32 size: the record's 6 bytes start at 28.
        (ADD_MESSAGE, 136, 1, HEADER + 15, "record_data"),
        (ADD_MESSAGE, 130, 1, HEADER + 15, "record_data"),
        (ADD_MESSAGE, 136, 7, HEADER + 11, "record_data"),
        (ADD_MESSAGE, 136, 19, HEADER + 2, "record_id"),
        (ADD_MESSAGE, 130, 20, HEADER + 1, "operation"),
        # two booleans, the 36-character node ID (i32, u16, its 36 bytes at 21), the data type at 57, its count at 58.
        (ReplicationStartSyncMessage(False, True, NODE, 0, (2, 3)), 136, 1, HEADER + 45, "ids"),
        (ReplicationStartSyncMessage(False, True, NODE, 0, (2, 3)), 136, 18, HEADER + 45, "ids"),
        (ReplicationStartSyncMessage(False, True, NODE, 0, (2, 3)), 136, 22, HEADER + 8, "node_id"),
        (ReplicationPrimaryIsStoppingMessage(PrimaryStopping.FAIL_OVER), 136, 1, HEADER, "primary_stopping"),
    ],
    ids=["record", "record-at-130", "record-size", "record-id", "operation-at-130", "ids", "ids-count", "node-id",
         "stopping-code"],
)
def test_truncated_frame_is_refused_at_its_offset(packet: Packet, version: int, cut: int, offset: int,
                                                  field: str) -> None:
    frame = raw.truncated(packet, cut, channel_id=REPLICATION, version=version)
    with pytest.raises(MalformedFrame) as caught:
        decode_frame(frame, version=version)
    assert caught.value.offset == offset
    assert caught.value.field_path == field
    assert caught.value.packet_type == packet.type_name()
