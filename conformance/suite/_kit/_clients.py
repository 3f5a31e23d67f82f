"""The kit's client as the cases use it: one answer for the protocol version a target is spoken to in, and
the two client profiles the groups drive (a session that reattaches, a session that outlives a restart)."""

from __future__ import annotations

import dataclasses
from typing import Any

from cck.codec import ARTEMIS_2_7_0_VERSION, CURRENT_VERSION
from cck.conformance.targets import Target
from cck.reference.client import ClientSettings

__all__ = ["REATTACHING", "RESTARTING", "client_settings", "protocol_version"]

#: Reattach and window groups: reconnect forever every 100 ms (the proxy's outages are short), calls bounded
#: well inside the cases' own deadlines.
REATTACHING = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100,
                             call_timeout_ms=15_000, call_failover_timeout_ms=30_000)
#: Restart, failover, DTX, cluster and discovery groups: reconnect forever every 100 ms (a JVM takes seconds to
#: come back; the attempts are cheap), longer call deadlines across a restart, and blocking non-durable sends
#: so that every send in a history is confirmed.
RESTARTING = ClientSettings(reconnect_attempts=-1, retry_interval_ms=100, max_retry_interval_ms=100,
                            call_timeout_ms=20_000, call_failover_timeout_ms=60_000, block_on_non_durable_send=True)


def protocol_version(target: Target) -> int:
    """The newest version both sides speak: the target's own (Artemis refuses a client newer than itself, e.g.
    2.28.0 speaks 134), capped at the codec's (a target file may name a newer broker than the codec knows; it
    accepts older clients).  A target that does not say gets the codec's."""
    if target.protocol_version is None:
        return CURRENT_VERSION
    return min(CURRENT_VERSION, target.protocol_version)


def client_settings(target: Target, profile: ClientSettings, **changes: Any) -> ClientSettings:
    """``profile`` spoken in the target's protocol version, with ``changes`` (a case's window, ttl, ...).

    Below 130 a send with a confirmation window is answered only by the PACKETS_CONFIRMED that covers it, which
    can wait for the broker's next TTL check (2 s); from 130 every such send asks for an answer.  So that a case
    waits for a send as long as the broker takes to process it on every version, its sends ask for an answer
    below 130 too (non-durable ones block, unless the case says otherwise)."""
    version = protocol_version(target)
    settings = dataclasses.replace(profile, version=version, **changes)
    if (version < ARTEMIS_2_7_0_VERSION and settings.confirmation_window_size != -1
            and "block_on_non_durable_send" not in changes):
        settings = dataclasses.replace(settings, block_on_non_durable_send=True)
    return settings
