"""The common base of every packet dataclass."""

from __future__ import annotations

from typing import Any, ClassVar

from construct import Construct, Struct

from .._constants import PacketType
from .._format import from_container

__all__ = ["Packet", "extend"]


class Packet:
    """Base of all packets.

    Subclasses are ``@dataclass(frozen=True, slots=True)`` whose fields, in order,
    are the fields of ``FORMAT`` (a construct ``Struct`` over the frame body).
    Class attributes say how the protocol treats the packet:

    * ``TYPE``: the type code byte.
    * ``CONFIRMABLE``: counted by the confirmation window (``isRequiresConfirmations``).
    * ``IS_RESPONSE``: consumed by a blocked caller rather than a channel handler.
    """

    __slots__ = ()

    TYPE: ClassVar[PacketType]
    FORMAT: ClassVar[Construct]
    CONFIRMABLE: ClassVar[bool] = True
    IS_RESPONSE: ClassVar[bool] = False

    def requires_confirmations(self) -> bool:
        """Whether the confirmation window counts this packet."""
        return self.CONFIRMABLE

    @classmethod
    def type_name(cls) -> str:
        """The Artemis constant name of this packet's type, e.g. ``"SESS_SEND"``."""
        return cls.TYPE.name

    @classmethod
    def from_fields(cls, fields: Any) -> Packet:
        """Build from a parsed container (lists become tuples)."""
        return from_container(cls, cls.__dataclass_fields__, fields)  # type: ignore[attr-defined]


def extend(base: type[Packet], *subcons: Construct) -> Construct:
    """The base packet's format followed by more fields (``_V2`` adds to ``v1``)."""
    return Struct(*base.FORMAT.subcons, *subcons)
