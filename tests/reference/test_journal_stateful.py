"""hypothesis state machine: the journal against a dict model, across syncs, reopens and compactions."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from cck.reference.journal import Journal, JournalStateError, PreparedTransaction, RecordInfo

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
