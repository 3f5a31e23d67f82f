"""Journal replication from a primary to its backup, on channel 2 (``REPLICATION``): a journal record appended or
updated, the start and the end of the initial synchronisation, and the primary's notice that it is stopping.

Only REPLICATION_APPEND changes with the protocol version: before version 131 (Artemis 2.18.0) its operation is a
boolean, from 131 on a byte (see :class:`ReplicationAddMessage`).  REPLICATION_START_FINISH_SYNC changed with the
releases rather than with the version number: see :class:`ReplicationStartSyncMessage` for when its trailer is on
the wire.  Artemis's own decoders for these packets live in the broker (``ServerPacketDecoder``), not in the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from io import BytesIO
from typing import Any

from construct import Construct, Struct

from .._constants import ARTEMIS_2_18_0_VERSION, AddOperationType, PacketType, PrimaryStopping
from .._format import Trailing
from .._primitives import I8, I32, I64, Bool, Bytes, Counted, FieldError, Str
from ._base import Packet

__all__ = [
    "ReplicationAddMessage",
    "ReplicationPrimaryIsStoppingMessage",
    "ReplicationStartSyncMessage",
    "is_before_2_18",
]


def is_before_2_18(version: int) -> bool:
    """Artemis's ``isBeforeTwoEighteen``: protocol ``version`` is below 131.  Unlike most of Artemis's version
    checks it counts 0 (nothing negotiated yet) as old."""
    return version < ARTEMIS_2_18_0_VERSION


class _Operation(Construct):  # type: ignore[misc]
    """REPLICATION_APPEND's operation, an :class:`AddOperationType` code.

    From version 131 on the byte ``ADD_OPERATION_TYPE.toRecord()`` (0 UPDATE, 1 ADD, 2 EVENT); a code Artemis does
    not know it reads as ADD, the codec keeps it.  Before 131 a boolean, true for UPDATE, read as UPDATE or ADD;
    EVENT has no boolean form, so the encoder refuses it there.
    """

    def _parse(self, stream: BytesIO, context: Any, path: str) -> int:
        if is_before_2_18(int(context._params.version)):
            is_update = Bool._parse(stream, context, path)
            return int(AddOperationType.UPDATE if is_update else AddOperationType.ADD)
        code: int = I8._parse(stream, context, path)
        return code

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        version = int(context._params.version)
        if not is_before_2_18(version):
            I8._build(obj, stream, context, path)
            return obj
        if obj not in (AddOperationType.UPDATE, AddOperationType.ADD):
            raise FieldError(
                f"operation {obj!r} has no form before protocol {ARTEMIS_2_18_0_VERSION} (version {version}), where "
                "the operation is a boolean: UPDATE or ADD",
                path=path,
                offset=None,
            )
        Bool._build(obj == AddOperationType.UPDATE, stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return 1


@dataclass(frozen=True, slots=True)
class ReplicationAddMessage(Packet):
    """REPLICATION_APPEND (channel 2, primary to backup): a record added to or updated in one of the primary's
    journals, outside a transaction.

    ``journal_id`` names the journal (0 bindings, 1 messages); ``operation`` is an :class:`AddOperationType` code,
    a byte from protocol 131 (Artemis 2.18.0) on and a boolean (true for UPDATE) below it, 0 included, as Artemis's
    ``isBeforeTwoEighteen`` decides; ``journal_record_type`` is the journal's record type (``JournalRecordIds``);
    ``record_data`` is the record as the journal encodes it, kept as bytes.

    Artemis 2.18.0 to 2.23.x wrote the byte whatever the peer's version (an Artemis 2.17 backup reads it as the
    boolean, so 0, UPDATE, as ADD, and 1, ADD, as UPDATE); 2.24.0 and later choose by the connection's version, as the
    codec does.
    """

    TYPE = PacketType.REPLICATION_APPEND
    FORMAT = Struct(
        "journal_id" / I8,
        "operation" / _Operation(),
        "record_id" / I64,
        "journal_record_type" / I8,
        "record_data" / Bytes,
    )

    journal_id: int
    operation: int
    record_id: int
    journal_record_type: int
    record_data: bytes


class _Ids(Construct):  # type: ignore[misc]
    """The IDs after ``data_type``: an ``i32`` count and that many longs when ``data_type`` is on the wire, else
    nothing (``None``)."""

    _IDS = Counted(I64, 8)

    def _parse(self, stream: BytesIO, context: Any, path: str) -> list[int] | None:
        if context.data_type is None:
            return None
        ids: list[int] = self._IDS._parsereport(stream, context, path)
        return ids

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if (obj is None) != (context.data_type is None):
            raise FieldError(
                "data_type and ids travel together: both None (no trailer) or both set (ids may be empty)",
                path=path,
                offset=None,
            )
        if obj is None:
            return None
        return self._IDS._build(obj, stream, context, path)


@dataclass(frozen=True, slots=True)
class ReplicationStartSyncMessage(Packet):
    """REPLICATION_START_FINISH_SYNC (channel 2, primary to backup): the synchronisation of one kind of data starts
    (``synchronization_finished`` false), or the whole synchronisation is over (true).

    At the start, ``data_type`` (a :class:`SyncDataType` code) says what ``ids`` are: the journal file IDs of the
    bindings or messages journal (the backup reserves them), or large-message IDs.  At the end, Artemis 2.18.0 and
    later send the primary's node activation sequence as the one ID of type ``ActivationSequence``.
    ``allows_auto_fail_back`` is the primary's fail-back setting (the large-message packet leaves it false and
    ``node_id`` empty).

    The trailer, ``data_type`` then an ``i32`` count and that many longs, is absent (both fields ``None``) when
    Artemis 2.17 or earlier announced the end: those writers stop after ``node_id`` whenever synchronisation has
    finished, and their readers only read the trailer when it has not.  Artemis 2.24.0 and later read it exactly
    when bytes remain after ``node_id``, and so does the codec; it writes the trailer exactly when ``data_type`` is
    set, at every version.  No pinned Artemis leaves it off: 2.24.0 to 2.39.x mean to for a peer below protocol
    131, but their constructor sets that flag from the not yet set ``synchronizationIsFinished`` (always false,
    ARTEMIS-5107), and 2.40.0 dropped the flag.  ``data_type`` is kept as its byte; Artemis refuses codes outside
    :class:`SyncDataType`.
    """

    TYPE = PacketType.REPLICATION_START_FINISH_SYNC
    FORMAT = Struct(
        "synchronization_finished" / Bool,
        "allows_auto_fail_back" / Bool,
        "node_id" / Str,
        "data_type" / Trailing(I8),
        "ids" / _Ids(),
    )

    synchronization_finished: bool
    allows_auto_fail_back: bool
    node_id: str
    data_type: int | None
    ids: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class ReplicationPrimaryIsStoppingMessage(Packet):
    """REPLICATION_SCHEDULED_FAILOVER (channel 2, primary to backup): the primary is stopping on purpose.

    ``primary_stopping`` is a :class:`PrimaryStopping` code: first ``STOP_CALLED`` (the backup stops reacting to the
    primary's disconnect as a failure), then ``FAIL_OVER`` (take over now).  Artemis's decoder reads every code but 0
    as ``FAIL_OVER``; the codec keeps the int.  Artemis 2.31.x and earlier call the class
    ``ReplicationLiveIsStoppingMessage``; the bytes are the same.
    """

    TYPE = PacketType.REPLICATION_SCHEDULED_FAILOVER
    FORMAT = Struct("primary_stopping" / I32)

    primary_stopping: int = PrimaryStopping.STOP_CALLED
