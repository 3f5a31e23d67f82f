"""Server-side sessions, consumers and transactions, and the registry of sessions by name."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cck.codec import CoreMessage, ExceptionType, Xid

from .._window import ReceiveWindow, SendWindow
from ._authorization import Principal
from ._errors import BrokerError
from ._model import MessageRef, Queue
from ._selector import compile_selector

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["Consumer", "Session", "SessionRegistry", "Transaction"]


@dataclass(eq=False)
class Consumer:
    """A consumer on one queue.  ``credits`` is in bytes of SESS_RECEIVE_MSG frames;
    it starts at 0 (nothing is delivered before the first SESS_FLOWTOKEN) and
    -1 means unbounded."""

    consumer_id: int
    session: Session
    queue: Queue
    filter_string: str | None = None
    browse_only: bool = False
    credits: int = 0
    delivering: OrderedDict[int, MessageRef] = field(default_factory=OrderedDict)
    browse_position: int = 0

    def has_credit(self) -> bool:
        return self.credits == -1 or self.credits > 0

    def accepts(self, message: CoreMessage) -> bool:
        """Whether the consumer's filter selects the message (no filter selects everything)."""
        return self.filter_string is None or compile_selector(self.filter_string)(message)


@dataclass(eq=False)
class Transaction:
    """Work done in a transacted session (or an XA branch) since its last commit.

    Sends are routed only at commit; acknowledged refs leave their queue at
    commit and go back (for redelivery) at rollback.
    """

    sends: list[tuple[CoreMessage, str]] = field(default_factory=list)
    routes: list[tuple[CoreMessage, list[Queue]]] = field(default_factory=list)  # decided at prepare
    ref_ids: dict[tuple[int, str], int] = field(default_factory=dict)  # journal REF records written at prepare
    acks: list[MessageRef] = field(default_factory=list)
    rollback_only: str | None = None  # why, when it can no longer commit
    #: a send refused while this transaction was open (the last one): its commit or prepare rolls it back and
    #: answers with that refusal, as Artemis's rollback-only transaction rethrows its cause; later work is accepted
    refused: BrokerError | None = None
    xid: Xid | None = None
    state: str = "ACTIVE"  # ACTIVE, SUSPENDED, PREPARED, ROLLBACK_ONLY
    timeout_s: int = 0
    started_at_ms: int = 0
    journal_tx: int = 0

    @property
    def empty(self) -> bool:
        return not self.sends and not self.acks

    def check_open(self) -> None:
        """Refuse more work in a transaction that can only roll back (with the reason it must)."""
        if self.rollback_only:
            raise BrokerError(ExceptionType.TRANSACTION_ROLLED_BACK, self.rollback_only)

    def timed_out(self, now_ms: int) -> bool:
        """An unprepared branch past its timeout (0: none)."""
        return self.state != "PREPARED" and self.timeout_s > 0 and now_ms - self.started_at_ms > self.timeout_s * 1000


@dataclass(eq=False)
class Session:
    """A core session: its channel on a connection, window, consumers and work."""

    name: str
    channel_id: int
    connection: Connection
    username: str | None
    xa: bool
    auto_commit_sends: bool
    auto_commit_acks: bool
    pre_acknowledge: bool
    window_size: int
    default_address: str | None = None
    #: who the authenticator said the session is (what the permission checks ask about)
    principal: Principal | None = None
    consumers: dict[int, Consumer] = field(default_factory=dict)
    producers: dict[int, str | None] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    started: bool = False
    tx: Transaction = field(default_factory=Transaction)
    xa_timeout_s: int = 0
    send_window: SendWindow = field(init=False)
    receive_window: ReceiveWindow = field(init=False)
    detached_at_ms: int | None = None  # when its connection dropped (kept for reattach)

    def __post_init__(self) -> None:
        self.send_window = SendWindow(self.window_size)
        self.receive_window = ReceiveWindow(self.window_size)

    @property
    def supports_reattach(self) -> bool:
        """Kept after a TCP drop only with a window > 0 (0 keeps a cache but does not count)."""
        return self.window_size > 0

    @property
    def transacted(self) -> bool:
        return not self.auto_commit_sends or not self.auto_commit_acks or self.xa


class SessionRegistry:
    """Sessions by name: the one map that session creation, reattach, unique metadata and close share.

    A name maps to the session created last with it (a client that reuses a name replaces the
    registration); removing an older session of that name leaves the newer one registered."""

    def __init__(self) -> None:
        self._by_name: dict[str, Session] = {}
        #: sessions registered since the broker started (a backup mirrors only a core that never had one)
        self.opened = 0

    def get(self, name: str) -> Session | None:
        return self._by_name.get(name)

    def register(self, session: Session) -> Session | None:
        """Register ``session``; returns the session it replaced under that name, if any."""
        self.opened += 1
        replaced = self._by_name.get(session.name)
        self._by_name[session.name] = session
        return replaced

    def remove(self, session: Session) -> None:
        if self._by_name.get(session.name) is session:
            del self._by_name[session.name]

    def __iter__(self) -> Iterator[Session]:
        """A snapshot: closing sessions while iterating is safe."""
        return iter(list(self._by_name.values()))

    def metadata_taken(self, key: str, data: str, by: Session) -> bool:
        """Whether another session already carries this metadata (SESS_UNIQUE_ADD_METADATA)."""
        return any(other is not by and other.metadata.get(key) == data for other in self._by_name.values())
