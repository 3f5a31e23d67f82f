"""What the failover machine (:mod:`reference.client._failover`) uses that is not the machine: the error the
application sees once it gives up, and the topology of every connection fed to the locator's balancer."""

from __future__ import annotations

import logging

from cck.codec import ExceptionType

from ._balance import Balancer
from ._connection import TopologyMember
from ._errors import ClientError, ConnectFailed, ConnectionFailed
from ._locator import Connector, connector_of

__all__ = ["balance_topology", "connect_gave_up", "reconnection_gave_up"]

LOG = logging.getLogger("cck.reference.client")


def _reason(error: ClientError) -> str:
    return error.reason if isinstance(error, ConnectionFailed) else str(error)


def _code(error: ClientError) -> int:
    code = getattr(error, "code", None)
    return code if isinstance(code, int) else int(ExceptionType.NOT_CONNECTED)


def reconnection_gave_up(cause: ClientError | None, attempts: int, internal: str | None) -> ClientError:
    """A reconnection found no server: the failure it was recovering from, with its code, and how many attempts
    were made (``internal``: the defect of the client that stopped it, if one did)."""
    cause = cause or ConnectionFailed("the connection failed")
    reason = _reason(cause) + (f"; reconnection stopped by an internal error: {internal}" if internal else "")
    return ConnectionFailed(f"{reason}; reconnection gave up after {attempts} attempt(s)", _code(cause))


def connect_gave_up(last_error: str, attempts: int, internal: str | None) -> ClientError:
    """The first connection found no server: the last attempt's error and how many attempts were made."""
    last = f"internal error: {internal}" if internal else last_error
    return ConnectFailed(f"{last} (gave up after {attempts} attempt(s))")


def balance_topology(balancer: Balancer[Connector], node_id: str, member: TopologyMember | None, last: bool,
                     used: Connector | None) -> None:
    """One topology message of any connection, fed to the locator's balancer as Artemis does (``used``: the
    connector of the connection it came on)."""
    if member is None:
        balancer.node_down(node_id)
        return
    if member.live is None and member.backup is None:
        # A broker outside a cluster names no connector: Artemis records the one the connection used.
        connector = used
    else:
        connector = connector_of(member.live) if member.live is not None else None
    if connector is None:
        LOG.warning("topology member %s has no TCP connector the client can use (%s); not balanced to",
                    node_id, member.live)
        if last:
            balancer.received_topology = True
        return
    balancer.node_up(node_id, connector, last=last)
