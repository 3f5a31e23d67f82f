"""What the kit's client raises.  Every error says what failed and, for broker
refusals, carries the ``ActiveMQExceptionType`` code the broker sent."""

from __future__ import annotations

from cck.codec import ExceptionType

__all__ = [
    "BrokerRefused",
    "CallTimeout",
    "ClientError",
    "ConnectionFailed",
    "ConnectFailed",
    "DeliveryFromLostSession",
    "FailoverInterrupted",
    "ObjectClosed",
    "ProtocolViolation",
    "TransactionRolledBack",
    "XAError",
]


class ClientError(Exception):
    """Base of every client error."""


class BrokerRefused(ClientError):
    """The broker answered a request with an EXCEPTION packet."""

    def __init__(self, code: int, message: str | None, request: str) -> None:
        self.code = code
        self.broker_message = message
        self.request = request
        try:
            name = ExceptionType(code).name
        except ValueError:
            name = f"code {code}"
        super().__init__(f"{request} refused by the broker: {name}: {message}")

    @property
    def type(self) -> ExceptionType | None:
        """The code as an :class:`~codec.ExceptionType`, or ``None`` for a code this codec does not know."""
        try:
            return ExceptionType(self.code)
        except ValueError:
            return None


class XAError(ClientError):
    """A SESS_XA_RESP with ``error=true``; ``code`` is the XAException code (e.g. -4 XAER_NOTA)."""

    def __init__(self, code: int, message: str | None, request: str) -> None:
        self.code = code
        self.broker_message = message
        self.request = request
        super().__init__(f"{request} failed: XA code {code}: {message}")


class CallTimeout(ClientError):
    """No answer within ``call_timeout``."""

    def __init__(self, request: str, timeout_ms: int) -> None:
        self.request = request
        self.timeout_ms = timeout_ms
        super().__init__(f"{request}: no answer from the broker within {timeout_ms} ms (call_timeout)")


class ConnectionFailed(ClientError):
    """The connection is gone (closed, timed out, DISCONNECT from the broker, bad input)."""

    def __init__(self, reason: str, code: int = int(ExceptionType.NOT_CONNECTED)) -> None:
        self.reason = reason
        self.code = code
        super().__init__(f"connection failed: {reason}")


class ConnectFailed(ConnectionFailed, ConnectionRefusedError):
    """The locator could not connect: every initial attempt was refused, timed out or closed by the peer (also a
    ``ConnectionRefusedError``, as a socket's connect would be)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.args = (reason,)  # the message a refused connect has always had: the reason itself


class ObjectClosed(ClientError):
    """The session, producer or consumer was closed before the call."""


class ProtocolViolation(ClientError):
    """The broker sent something the protocol does not allow here (named in the message)."""


class FailoverInterrupted(ClientError):
    """A call that was waiting when the connection failed and the session had to be recreated (not
    reattached): its outcome is unknown (Artemis's UNBLOCKED)."""

    code = int(ExceptionType.UNBLOCKED)

    def __init__(self, request: str) -> None:
        self.request = request
        super().__init__(f"{request}: interrupted by failover; the session was recreated, the outcome is unknown")


class DeliveryFromLostSession(ClientError):
    """An acknowledgement of a delivery received before the session was recreated: that delivery ended with the
    lost session and the broker delivers the message again, so nothing was acknowledged and nothing was sent."""

    def __init__(self, message_id: int) -> None:
        self.message_id = message_id
        super().__init__(f"message {message_id} was delivered by a session that failover recreated; it is delivered "
                         "again, acknowledge that delivery instead")


class TransactionRolledBack(ClientError):
    """Commit of a transaction that failover made rollback-only: it was rolled back instead."""

    code = int(ExceptionType.TRANSACTION_ROLLED_BACK)

    def __init__(self, session: str) -> None:
        super().__init__(f"session {session!r}: the transaction was rolled back because the session was recreated "
                         "after a failure; send and consume its work again")
