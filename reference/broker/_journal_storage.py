"""Durable broker state on the journal, and its recovery after a restart.

Records (``user_type``), all keyed by broker-wide unique IDs:

==========  =========================================================================
ADDRESS     JSON: name, routing types, auto-created (durable addresses only)
QUEUE       JSON: name, address, routing type, filter, max consumers, ...
MESSAGE     the message buffer as it travels in SESS_SEND (``codec.encode_message``);
            record ID = message ID
REF         8-byte message ID + UTF-8 queue name: the message is on that queue;
            acknowledging deletes the REF, the last ack also deletes the MESSAGE
REF_COUNTED a REF updated when its delivery was cancelled (rollback, consumer or
            session close): 8-byte message ID, 4-byte delivery count, queue name;
            as Artemis, which writes the count on cancel, so a redelivery after a
            graceful restart still carries the redelivered mark
DUP_ID      the duplicate ID of a durable message a cluster bridge delivered
            (``_AMQ_BRIDGE_DUP``), so a bridge's resend after this node crashed and
            recovered is still recognised; deleted as the cache (id-cache-size) evicts it
SEND_DUP_ID a producer's duplicate ID (``_AMQ_DUPL_ID``): 2-byte address length, the
            UTF-8 address, the ID; written in the journal transaction of its message,
            deleted as the address's cache evicts it
==========  =========================================================================

Local transactions write their records with the journal transaction at commit;
XA branches write them at prepare and commit or roll back later, so a prepared
branch comes back after a restart (spec 004: prepared DTX transactions are
preserved; sessions, non-durable wiring and messages, local and unprepared
transactions are not).
"""

from __future__ import annotations

import json
import logging
import struct
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cck.codec import CoreMessage, Xid, decode_message, decode_xid, encode_message, encode_xid

from ._model import Address, MessageRef, PostOffice, Queue
from ._session import Transaction

if TYPE_CHECKING:
    from ..journal import Journal, PendingSync, PreparedTransaction, Recovery
    from ._cluster_hooks import ClusterHooks
    from ._duplicates import DuplicateIds
    from ._transactions import Transactions

LOG = logging.getLogger("cck.reference.journal")

__all__ = ["ADDRESS", "DUP_ID", "MESSAGE", "QUEUE", "REF", "REF_COUNTED", "SEND_DUP_ID", "JournalStorage",
           "RecoveryReport"]

ADDRESS, QUEUE, MESSAGE, REF, REF_COUNTED, DUP_ID, SEND_DUP_ID = 1, 2, 3, 4, 5, 6, 7
_ADDRESS_LENGTH = struct.Struct(">H")
_MESSAGE_ID = struct.Struct(">q")
_COUNTED = struct.Struct(">qi")  # message ID, delivery count


@dataclass(frozen=True)
class RecoveryReport:
    addresses: int
    queues: int
    messages: int
    prepared: int
    discarded_transactions: int
    torn_bytes: int


class JournalStorage:
    """The broker's :class:`~reference.broker.Storage` on a :class:`~reference.journal.Journal`."""

    def __init__(self, journal: Journal, *, compact_min_files: int = 10, compact_percentage: int = 30,
                 count_before_delivery: bool = True) -> None:
        self.journal = journal
        #: ``<persist-delivery-count-before-delivery>``: each delivery's count is stored before it goes out (the
        #: reference broker's default; off, counts are stored only when a delivery is cancelled, as Artemis's default)
        self.count_before_delivery = count_before_delivery
        self.compact_min_files = compact_min_files
        self.compact_percentage = compact_percentage
        self.compactions = 0
        self._files_judged = 0  # the data-file count compaction was last judged at
        self._address_ids: dict[str, int] = {}
        self._queue_ids: dict[str, int] = {}
        self._refs_left: dict[int, int] = defaultdict(int)  # message ID -> durable refs not yet acked
        self._pending_refs: dict[int, list[int]] = {}
        #: the post office's ID sequence, which journal record IDs share (given at :meth:`recover`)
        self._next_id: Callable[[], int] | None = None
        #: (record ID, duplicate ID) of the DUP_ID records found at recovery, oldest first
        self.recovered_duplicate_ids: list[tuple[int, bytes]] = []
        #: (record ID, address, duplicate ID) of the SEND_DUP_ID records found at recovery, oldest first
        self.recovered_send_duplicate_ids: list[tuple[int, str, bytes]] = []

    def _id(self) -> int:
        assert self._next_id is not None, "recover the journal first"
        return self._next_id()

    # ---------------------------------------------------------------- Storage protocol

    def address_added(self, address: Address) -> None:
        if not address.durable or address.name in self._address_ids:
            return
        record = self._id()
        self._address_ids[address.name] = record
        self.journal.add(record, ADDRESS, json.dumps(
            {"name": address.name, "routing_types": sorted(address.routing_types),
             "auto_created": address.auto_created}).encode())

    def queue_added(self, queue: Queue) -> None:
        if queue.name in self._queue_ids:
            return
        record = self._id()
        self._queue_ids[queue.name] = record
        self.journal.add(record, QUEUE, json.dumps(
            {"name": queue.name, "address": queue.address, "routing_type": queue.routing_type,
             "filter": queue.filter_string, "max_consumers": queue.max_consumers,
             "purge_on_no_consumers": queue.purge_on_no_consumers,
             "auto_created": queue.auto_created}).encode())

    def queue_removed(self, queue: Queue) -> None:
        record = self._queue_ids.pop(queue.name, None)
        if record is not None:
            self.journal.delete(record)

    def message_routed(self, message: CoreMessage, queues: list[Queue], tx_id: int | None) -> None:
        data = encode_message(message)
        refs = []
        for queue in queues:
            refs.append((self._id(), _MESSAGE_ID.pack(message.message_id) + queue.name.encode()))
        if tx_id is None:
            self.journal.add(message.message_id, MESSAGE, data)
            for record, payload in refs:
                self.journal.add(record, REF, payload)
        else:
            self.journal.add_tx(tx_id, message.message_id, MESSAGE, data)
            for record, payload in refs:
                self.journal.add_tx(tx_id, record, REF, payload)
        self._refs_left[message.message_id] += len(refs)
        self._pending_refs.setdefault(message.message_id, []).extend(r for r, _ in refs)

    def ref_acked(self, ref: MessageRef, tx_id: int | None) -> None:
        record = ref.record_id
        if record == 0:
            return
        message_id = ref.message_id
        self._refs_left[message_id] -= 1
        last = self._refs_left[message_id] <= 0
        if tx_id is None:
            self.journal.delete(record)
            if last:
                self.journal.delete(message_id)
        else:
            self.journal.delete_tx(tx_id, record)
            if last:
                self.journal.delete_tx(tx_id, message_id)
        if last:
            self._refs_left.pop(message_id, None)

    def delivery_counted(self, ref: MessageRef) -> None:
        """A delivered ref went back to its queue: keep its delivery count.  Artemis writes it at this point
        (and, by default, not before each delivery); with ``count_before_delivery`` off a kill -9 between delivery
        and cancel loses it here too."""
        if ref.delivery_count <= 0 and not self.count_before_delivery:
            return  # never counted; with counts stored before delivery a clean close's decrement must be kept
        self._store_count(ref)

    def delivery_starting(self, ref: MessageRef) -> None:
        """With ``count_before_delivery`` (the default): the count of a delivery about to go out.  The server
        writes no reply before the storage has synced, so the count is on disk before the consumer has it."""
        if self.count_before_delivery:
            self._store_count(ref)

    def _store_count(self, ref: MessageRef) -> None:
        if ref.record_id == 0 or not self.journal.is_live(ref.record_id):
            return  # not durable, or its REF is still inside an unfinished transaction
        self.journal.update(ref.record_id, REF_COUNTED,
                            _COUNTED.pack(ref.message_id, ref.delivery_count) + ref.queue.name.encode())

    def tx_prepare(self, tx_id: int, xid: Xid) -> None:
        self.journal.prepare(tx_id, encode_xid(xid))

    def tx_commit(self, tx_id: int) -> None:
        self.journal.commit(tx_id)

    def tx_rollback(self, tx_id: int) -> None:
        self.journal.rollback(tx_id)

    def duplicate_id_added(self, dup_id: bytes) -> int:
        record = self._id()
        self.journal.add(record, DUP_ID, dup_id)
        return record

    def send_duplicate_id_added(self, address: str, dup_id: bytes, tx_id: int | None) -> int:
        record = self._id()
        name = address.encode()
        payload = _ADDRESS_LENGTH.pack(len(name)) + name + dup_id
        if tx_id is None:
            self.journal.add(record, SEND_DUP_ID, payload)
        else:
            self.journal.add_tx(tx_id, record, SEND_DUP_ID, payload)
        return record

    def duplicate_id_removed(self, record: int) -> None:
        if record and self.journal.is_live(record):
            self.journal.delete(record)

    def sync(self) -> None:
        if self.journal.pending:
            self.journal.sync()

    def begin_sync(self) -> PendingSync | None:
        """The event loop's half of a group commit (the server runs the fsync in a worker thread).

        ``None`` when nothing stored is waiting: then a failed journal is not asked (it would refuse).
        """
        self._compact_if_due()
        if not self.journal.pending:
            return None
        return self.journal.begin_sync()

    def _compact_if_due(self) -> None:
        """Online compaction, judged once per new data file (the live-size sum is O(live)).  It runs here, on the
        loop, between two batches: it makes every append durable, so the batch it precedes needs no fsync."""
        files = self.journal.data_files
        if files == self._files_judged:
            return
        self._files_judged = files
        if self.journal.compaction_due(self.compact_min_files, self.compact_percentage):
            self.journal.compact()
            self.compactions += 1
            self._files_judged = self.journal.data_files
            LOG.info("journal compacted", extra={"files_before": files, "files_after": self._files_judged})

    # ---------------------------------------------------------------- ref IDs

    def take_ref_ids(self, message_id: int) -> list[int]:
        """The REF record IDs just written for a message, in queue order (the core
        stores them on its MessageRefs so an ack can delete the right record)."""
        return self._pending_refs.pop(message_id, [])

    # ---------------------------------------------------------------- recovery

    def recover(self, recovery: Recovery, *, post_office: PostOffice, transactions: Transactions,
                cluster: ClusterHooks | None, duplicates: DuplicateIds | None = None) -> RecoveryReport:
        """Rebuild durable addresses, queues and messages into ``post_office``, the prepared XA branches into
        ``transactions``, the bridged messages' duplicate IDs into ``cluster`` (with a cluster connection) and the
        producers' duplicate IDs into ``duplicates``."""
        self._next_id = post_office.next_id
        highest = 0
        messages: dict[int, CoreMessage] = {}
        refs: list[tuple[int, bytes, int]] = []  # record ID, REF payload, delivery count
        for record in recovery.records:
            highest = max(highest, record.record_id)
            if record.user_type == ADDRESS:
                spec = json.loads(record.payload)
                post_office.add_address(spec["name"], set(spec["routing_types"]), auto_created=spec["auto_created"])
                self._address_ids[spec["name"]] = record.record_id
            elif record.user_type == QUEUE:
                spec = json.loads(record.payload)
                post_office.add_queue(Queue(
                    spec["name"], spec["address"], spec["routing_type"], durable=True,
                    filter_string=spec["filter"], max_consumers=spec["max_consumers"],
                    purge_on_no_consumers=spec["purge_on_no_consumers"], auto_created=spec["auto_created"]))
                self._queue_ids[spec["name"]] = record.record_id
            elif record.user_type == MESSAGE:
                messages[record.record_id] = decode_message(record.payload)
            elif record.user_type == REF:
                refs.append((record.record_id, record.payload, 0))
            elif record.user_type == DUP_ID:
                self.recovered_duplicate_ids.append((record.record_id, record.payload))
            elif record.user_type == SEND_DUP_ID:
                (length,) = _ADDRESS_LENGTH.unpack_from(record.payload)
                end = _ADDRESS_LENGTH.size + length
                address = record.payload[_ADDRESS_LENGTH.size:end].decode()
                self.recovered_send_duplicate_ids.append((record.record_id, address, record.payload[end:]))
            elif record.user_type == REF_COUNTED:
                message_id, count = _COUNTED.unpack_from(record.payload)
                refs.append((record.record_id, _MESSAGE_ID.pack(message_id) + record.payload[_COUNTED.size:], count))
        by_record: dict[int, MessageRef] = {}
        for record_id, payload, count in sorted(refs):
            ref = self._ref(post_office, messages, record_id, payload)
            if ref is not None:
                ref.delivery_count = count
                ref.queue.push_back(ref)
                by_record[record_id] = ref
        for prepared in recovery.prepared:
            highest = max(highest, prepared.tx_id)
            self._restore_prepared(transactions, post_office, prepared, messages, by_record)
        for tx in recovery.prepared:
            for record in tx.records:
                highest = max(highest, record.record_id)
        post_office.restart_ids_after(highest)
        self.recovered_duplicate_ids.sort()
        if cluster is not None:
            cluster.restore_duplicates(self.recovered_duplicate_ids)
        self.recovered_send_duplicate_ids.sort()
        if duplicates is not None:
            duplicates.restore(self.recovered_send_duplicate_ids)
        return RecoveryReport(
            addresses=len(self._address_ids), queues=len(self._queue_ids),
            messages=len(by_record), prepared=len(recovery.prepared),
            discarded_transactions=recovery.discarded_transactions, torn_bytes=recovery.torn_bytes,
        )  # fmt: skip

    def _ref(self, post_office: PostOffice, messages: dict[int, CoreMessage], record_id: int,
             payload: bytes) -> MessageRef | None:
        (message_id,) = _MESSAGE_ID.unpack_from(payload)
        queue = post_office.queues.get(payload[8:].decode())
        message = messages.get(message_id)
        if queue is None or message is None:
            return None
        self._refs_left[message_id] += 1
        return MessageRef(message, queue, record_id=record_id)

    def _restore_prepared(self, transactions: Transactions, post_office: PostOffice, prepared: PreparedTransaction,
                          messages: dict[int, CoreMessage], by_record: dict[int, MessageRef]) -> None:
        xid = decode_xid(prepared.data)
        tx = Transaction(xid=xid, journal_tx=prepared.tx_id)
        own_messages = dict(messages)
        for record in prepared.records:
            if record.user_type == MESSAGE:
                own_messages[record.record_id] = decode_message(record.payload)
        routes: dict[int, list[Queue]] = {}
        for record in prepared.records:
            if record.user_type == REF:
                ref = self._ref(post_office, own_messages, record.record_id, record.payload)
                if ref is not None:
                    routes.setdefault(ref.message_id, []).append(ref.queue)
                    tx.ref_ids[(ref.message_id, ref.queue.name)] = record.record_id
        tx.routes = [(own_messages[mid], queues) for mid, queues in routes.items()]
        for record_id in prepared.deletes:
            ref = by_record.get(record_id)
            if ref is not None and ref in ref.queue.ready:
                ref.queue.ready.remove(ref)  # acknowledged inside the branch: not redelivered
                tx.acks.append(ref)
        transactions.restore_prepared(xid, tx)


def open_journal(directory: Path, *, sync: bool = True, file_size: int = 10 * 1024 * 1024) -> tuple[Journal, Recovery]:
    from ..journal import Journal

    journal = Journal(directory, sync=sync, file_size=file_size)
    return journal, journal.open()
