"""hypothesis state machines: the journal against a dict model, across syncs, reopens and compactions; and a
replica fed with the journal's snapshot and appends, against the same model."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from cck.reference.journal import Journal, JournalCorrupted, JournalStateError, PreparedTransaction, RecordInfo

IDS = st.integers(min_value=0, max_value=12)
TXS = st.integers(min_value=1, max_value=4)
PAYLOADS = st.binary(max_size=40)
USER_TYPES = st.integers(min_value=0, max_value=3)
FILE_SIZE = 300  # small: rotation happens all the time


@dataclass
class ModelTx:
    writes: dict[int, RecordInfo] = field(default_factory=dict)
    added: set[int] = field(default_factory=set)
    deletes: dict[int, None] = field(default_factory=dict)
    prepared: bytes | None = None


class JournalMachine(RuleBasedStateMachine):
    """The model: committed records in first-add order, and unfinished transactions."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="cck-journal-"))
        self.journal = Journal(self.directory, file_size=FILE_SIZE)
        self.live: dict[int, RecordInfo] = {}
        self.txs: dict[int, ModelTx] = {}

    @initialize()
    def start(self) -> None:
        recovery = self.journal.open()
        assert recovery.records == ()
        assert recovery.files == 1

    def teardown(self) -> None:
        self.journal.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def visible(self, tx_id: int, record_id: int) -> bool:
        tx = self.txs.get(tx_id, ModelTx())
        return record_id in tx.writes or (record_id in self.live and record_id not in tx.deletes)

    def writable(self, tx_id: int) -> bool:
        return tx_id not in self.txs or self.txs[tx_id].prepared is None

    # -- non-transactional ----------------------------------------------------------------------------------

    @rule(record_id=IDS, user_type=USER_TYPES, payload=PAYLOADS)
    def add(self, record_id: int, user_type: int, payload: bytes) -> None:
        if record_id in self.live:
            try:
                self.journal.add(record_id, user_type, payload)
            except JournalStateError:
                return
            raise AssertionError("add of a live id was accepted")
        self.journal.add(record_id, user_type, payload)
        self.live[record_id] = RecordInfo(record_id, user_type, payload)

    @rule(record_id=IDS, user_type=USER_TYPES, payload=PAYLOADS)
    def update(self, record_id: int, user_type: int, payload: bytes) -> None:
        if record_id in self.live:
            self.journal.update(record_id, user_type, payload)
            self.live[record_id] = RecordInfo(record_id, user_type, payload)

    @rule(record_id=IDS)
    def delete(self, record_id: int) -> None:
        if record_id in self.live:
            self.journal.delete(record_id)
            del self.live[record_id]

    # -- transactional --------------------------------------------------------------------------------------

    @rule(tx_id=TXS, record_id=IDS, user_type=USER_TYPES, payload=PAYLOADS)
    def add_tx(self, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        if self.writable(tx_id) and not self.visible(tx_id, record_id):
            self.journal.add_tx(tx_id, record_id, user_type, payload)
            tx = self.txs.setdefault(tx_id, ModelTx())
            if record_id in tx.deletes:
                del tx.deletes[record_id]
            else:
                tx.added.add(record_id)
            tx.writes[record_id] = RecordInfo(record_id, user_type, payload)

    @rule(tx_id=TXS, record_id=IDS, user_type=USER_TYPES, payload=PAYLOADS)
    def update_tx(self, tx_id: int, record_id: int, user_type: int, payload: bytes) -> None:
        if self.writable(tx_id) and self.visible(tx_id, record_id):
            self.journal.update_tx(tx_id, record_id, user_type, payload)
            self.txs.setdefault(tx_id, ModelTx()).writes[record_id] = RecordInfo(record_id, user_type, payload)

    @rule(tx_id=TXS, record_id=IDS)
    def delete_tx(self, tx_id: int, record_id: int) -> None:
        if self.writable(tx_id) and self.visible(tx_id, record_id):
            self.journal.delete_tx(tx_id, record_id)
            tx = self.txs.setdefault(tx_id, ModelTx())
            tx.writes.pop(record_id, None)
            if record_id in tx.added:
                tx.added.discard(record_id)
            else:
                tx.deletes[record_id] = None

    @rule(tx_id=TXS, data=st.binary(max_size=20))
    def prepare(self, tx_id: int, data: bytes) -> None:
        if self.writable(tx_id):
            self.journal.prepare(tx_id, data)
            self.txs.setdefault(tx_id, ModelTx()).prepared = data

    @rule(tx_id=TXS)
    def commit(self, tx_id: int) -> None:
        if tx_id in self.txs:
            self.journal.commit(tx_id)
            tx = self.txs.pop(tx_id)
            self.live.update(tx.writes)
            for record_id in tx.deletes:
                self.live.pop(record_id, None)

    @rule(tx_id=TXS)
    def rollback(self, tx_id: int) -> None:
        if tx_id in self.txs:
            self.journal.rollback(tx_id)
            del self.txs[tx_id]

    # -- durability -----------------------------------------------------------------------------------------

    @rule()
    def sync(self) -> None:
        self.journal.sync()
        assert self.journal.pending == 0

    @rule()
    def compact(self) -> None:
        self.journal.compact()
        assert self.journal.pending == 0

    @rule()
    def reopen(self) -> None:
        self.journal.close()
        self.journal = Journal(self.directory, file_size=FILE_SIZE)
        recovery = self.journal.open()
        assert recovery.torn_bytes == 0
        assert recovery.records == tuple(self.live.values())
        expected_prepared = tuple(
            PreparedTransaction(tx_id, tx.prepared, tuple(tx.writes.values()), tuple(tx.deletes))
            for tx_id, tx in self.txs.items()
            if tx.prepared is not None
        )
        assert recovery.prepared == expected_prepared
        unprepared = [tx_id for tx_id, tx in self.txs.items() if tx.prepared is None]
        # an open transaction whose effects cancelled out (add then delete) may leave nothing to discard
        assert recovery.discarded_transactions <= len(unprepared)
        self.txs = {tx_id: tx for tx_id, tx in self.txs.items() if tx.prepared is not None}


JournalMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_journal_matches_a_dict_model = JournalMachine.TestCase


class ReplicatedJournalMachine(JournalMachine):
    """The same operations, with a replica attached at any point (the primary's snapshot, then every append it
    makes, replayed into a journal of its own): reopened, the replica holds the model's state."""

    def __init__(self) -> None:
        super().__init__()
        self.replica: Journal | None = None
        self.replica_dir = Path(tempfile.mkdtemp(prefix="cck-replica-"))

    def teardown(self) -> None:
        self.detach()
        super().teardown()
        shutil.rmtree(self.replica_dir, ignore_errors=True)

    def detach(self) -> None:
        self.journal.observe_appends(None)
        if self.replica is not None:
            self.replica.close()
            self.replica = None

    @rule()
    def attach(self) -> None:
        if self.replica is not None:
            return
        shutil.rmtree(self.replica_dir, ignore_errors=True)
        replica = Journal(self.replica_dir, file_size=FILE_SIZE)
        replica.open()
        replica.replay(b"".join(self.journal.snapshot()))
        self.journal.observe_appends(replica.replay)
        self.replica = replica

    @rule()
    def replica_matches(self) -> None:
        if self.replica is None:
            return
        self.detach()  # reopened, the replica discards its unprepared transactions: it no longer follows
        reopened = Journal(self.replica_dir, file_size=FILE_SIZE)
        try:
            recovery = reopened.open()
            assert recovery.records == tuple(self.live.values())
            assert recovery.prepared == tuple(
                PreparedTransaction(tx_id, tx.prepared, tuple(tx.writes.values()), tuple(tx.deletes))
                for tx_id, tx in self.txs.items() if tx.prepared is not None)
        finally:
            reopened.close()

    @rule()
    def reopen(self) -> None:
        self.detach()  # a restarted primary starts its backup afresh
        super().reopen()


ReplicatedJournalMachine.TestCase.settings = JournalMachine.TestCase.settings
test_a_replica_matches_the_model = ReplicatedJournalMachine.TestCase


def test_a_replicated_batch_that_does_not_decode_appends_nothing(tmp_path: Path) -> None:
    primary, replica = Journal(tmp_path / "p"), Journal(tmp_path / "r")
    primary.open()
    replica.open()
    try:
        sent: list[bytes] = []
        primary.observe_appends(sent.append)
        primary.add(1, 1, b"one")
        primary.add(2, 1, b"two")
        batch = b"".join(sent)
        with pytest.raises(JournalCorrupted) as bad:
            replica.replay(batch[:-3])
        assert bad.value.offset == len(sent[0])
        assert replica.pending == 0
        assert replica.replay(batch) == 2
        assert [replica.is_live(n) for n in (1, 2, 3)] == [True, True, False]
    finally:
        primary.close()
        replica.close()
