"""The UDP discovery datagram a broadcast group sends (notes §12.1)::

    Str nodeID, Str uniqueID, i32 count, count x TransportConfiguration

Connectors are single TransportConfigurations (no live/backup pairs).  A
receiver reads from offset 0 of a 64 KiB buffer, so bytes after the last
connector are ignored, as Artemis ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass

from construct import Struct

from ._constants import CURRENT_VERSION
from ._format import DataclassAdapter, build_format, parse_format
from ._primitives import Counted, Str
from ._structures import TRANSPORT_CONFIGURATION, TransportConfiguration

__all__ = ["DEFAULT_DISCOVERY_PORT", "DiscoveryDatagram", "decode_discovery", "encode_discovery"]

#: The conventional discovery port (client constant, docs); group 231.7.7.7.
DEFAULT_DISCOVERY_PORT = 9876
DEFAULT_DISCOVERY_GROUP = "231.7.7.7"


@dataclass(frozen=True, slots=True)
class DiscoveryDatagram:
    """One broadcast: the broker's node ID, the broadcast group's random unique ID
    (new per group instance) and the connectors clients should use."""

    node_id: str
    unique_id: str
    connectors: tuple[TransportConfiguration, ...] = ()


DISCOVERY_DATAGRAM = DataclassAdapter(
    DiscoveryDatagram,
    Struct(
        "node_id" / Str,
        "unique_id" / Str,
        "connectors" / Counted(TRANSPORT_CONFIGURATION, 12),
    ),
)


def encode_discovery(datagram: DiscoveryDatagram) -> bytes:
    """The datagram's bytes, exactly as a broadcast group sends them."""
    return build_format(DISCOVERY_DATAGRAM, datagram, what="discovery datagram", version=CURRENT_VERSION)


def decode_discovery(data: bytes) -> DiscoveryDatagram:
    """Decode a received datagram; raises :class:`~codec.CodecError` when malformed."""
    result: DiscoveryDatagram = parse_format(
        DISCOVERY_DATAGRAM,
        bytes(data),
        what="discovery datagram",
        version=CURRENT_VERSION,
        allow_trailing=True,
    )
    return result
