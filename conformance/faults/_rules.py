"""Fault rules: what the proxy does to a frame or to a new connection.

A rule is a frozen description (``Drop("s2c", {"NULL_RESPONSE"}, count=1)``);
installing it gives a :class:`RuleHandle` that carries the rule's running state
(how often it acted, what is left of its ``count``).  The proxy asks every
installed handle about each decoded frame and combines their answers in
:func:`judge`:

* the first handle, in the order they were added, that drops or cuts the frame
  decides its fate, and nothing else applies;
* otherwise every matching delay adds up, and the frame is sent twice when any
  duplicate rule matches.

Connection-level rules (:class:`RefuseConnections`, :class:`Blackhole`) are
asked once per accepted connection instead (:func:`on_accept`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

from cck.codec import PacketType

__all__ = [
    "HALF_OPEN",
    "Action",
    "Blackhole",
    "CutAfter",
    "Delay",
    "Direction",
    "Drop",
    "Duplicate",
    "Effect",
    "FrameView",
    "Latency",
    "RefuseConnections",
    "ResetDuringReattach",
    "Rule",
    "RuleHandle",
    "Verdict",
    "judge",
    "new_handle",
    "on_accept",
]

#: Client to broker, broker to client.
Direction = Literal["c2s", "s2c"]
#: What happened to a frame, as the wire log records it.
Action = Literal["forwarded", "dropped", "delayed", "duplicated", "cut"]

_DIRECTIONS = ("c2s", "s2c", "both")
_KNOWN_TYPES = frozenset(PacketType.__members__)
#: Artemis numbers session channels from 10; 0 is PING/topology, 1 session setup (notes §7).
_FIRST_SESSION_CHANNEL = 10


@dataclass(frozen=True, slots=True)
class FrameView:
    """What a rule may look at: where a decoded frame travels and what it is."""

    conn: int
    direction: Direction
    channel: int
    type_name: str
    confirmable: bool


#: How the log names what a half-open cut (``CutAfter(half_open=True)``) did: the start of the rule of its cut frame
#: and of every frame read and dropped on its connection after it.
HALF_OPEN = "half-open"


@dataclass(frozen=True, slots=True)
class Effect:
    """One rule's answer about one frame."""

    kind: Literal["drop", "cut", "delay", "duplicate"]
    seconds: float = 0.0
    #: A cut: only the client's side is reset; the broker's is left open and silent (``CutAfter.half_open``).
    half_open: bool = False


@dataclass(slots=True, eq=False)  # identity: two installs of equal rules are two handles
class RuleHandle:
    """An installed rule and its running state (returned by ``FaultProxy.add``)."""

    rule: Rule
    #: When it was installed, in the proxy's clock (ns).
    added_ns: int
    #: How many frames (or connections) it acted on.
    hits: int = 0
    #: What is left of the rule's budget; ``None``: unlimited.
    remaining: int | None = None
    #: For :class:`CutAfter`: confirmable frames counted so far.
    counted: int = 0
    installed: bool = True

    @property
    def spent(self) -> bool:
        return self.remaining == 0

    def _consume(self) -> None:
        self.hits += 1
        if self.remaining is not None:
            self.remaining -= 1


def _direction(value: str) -> str:
    if value not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(_DIRECTIONS)}; got {value!r}")
    return value


def _types(value: Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):  # a bare string would otherwise become a set of letters
        value = (value,)
    names = frozenset(value)
    unknown = sorted(names - _KNOWN_TYPES)
    if unknown:
        raise ValueError(f"unknown packet type name(s) {', '.join(unknown)} (names as in Artemis's PacketImpl)")
    return names


def _count(value: int | None, what: str) -> int | None:
    if value is not None and value < 0:
        raise ValueError(f"{what} must be >= 0 or None, got {value}")
    return value


def _seconds(value: float) -> float:
    if value < 0:
        raise ValueError(f"seconds must be >= 0, got {value}")
    return float(value)


class Rule:
    """Base of every fault rule."""

    __slots__ = ()

    def budget(self) -> int | None:
        """Initial ``remaining`` of a new handle (``None``: unlimited)."""
        return None

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        """What this rule would do to the frame (no state change)."""
        return None

    def observe(self, view: FrameView, handle: RuleHandle, *, forwarded: bool) -> None:
        """Told the frame's fate after the verdict (for rules that count traffic)."""

    def connection_effect(self, handle: RuleHandle) -> Literal["refuse", "blackhole"] | None:
        """What this rule does to a newly accepted connection."""
        return None

    def describe(self) -> str:
        return repr(self)


def _matches(direction: str, types: AbstractSet[str] | None, view: FrameView) -> bool:
    return direction in ("both", view.direction) and (types is None or view.type_name in types)


@dataclass(frozen=True, slots=True)
class Drop(Rule):
    """Drop matching frames; after ``count`` drops the rule stops acting."""

    direction: str
    packet_types: AbstractSet[str] | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _direction(self.direction))
        object.__setattr__(self, "packet_types", _types(self.packet_types))
        object.__setattr__(self, "count", _count(self.count, "count"))

    def budget(self) -> int | None:
        return self.count

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if handle.spent or not _matches(self.direction, self.packet_types, view):
            return None
        return Effect("drop")


@dataclass(frozen=True, slots=True)
class Delay(Rule):
    """Hold matching frames ``seconds`` before forwarding (later frames queue behind them)."""

    direction: str
    seconds: float
    packet_types: AbstractSet[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _direction(self.direction))
        object.__setattr__(self, "seconds", _seconds(self.seconds))
        object.__setattr__(self, "packet_types", _types(self.packet_types))

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if not _matches(self.direction, self.packet_types, view):
            return None
        return Effect("delay", self.seconds)


@dataclass(frozen=True, slots=True)
class Latency(Rule):
    """Constant added latency on every frame of ``direction``."""

    seconds: float
    direction: str = "both"

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", _seconds(self.seconds))
        object.__setattr__(self, "direction", _direction(self.direction))

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if not _matches(self.direction, None, view):
            return None
        return Effect("delay", self.seconds)


@dataclass(frozen=True, slots=True)
class Duplicate(Rule):
    """Forward matching frames twice (back to back); ``count`` bounds how many frames."""

    direction: str
    packet_types: AbstractSet[str] | None
    count: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _direction(self.direction))
        object.__setattr__(self, "packet_types", _types(self.packet_types))
        object.__setattr__(self, "count", _count(self.count, "count"))

    def budget(self) -> int | None:
        return self.count

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if handle.spent or not _matches(self.direction, self.packet_types, view):
            return None
        return Effect("duplicate")


@dataclass(frozen=True, slots=True)
class CutAfter(Rule):
    """Let ``confirmable_commands`` confirmable frames through, then reset the connection (RST both
    sides) when the next one arrives; that frame is not forwarded.  With ``half_open`` only the client's
    side is reset: the broker's stays open and silent (blackholed), as behind a firewall that forgot the
    connection, until the broker closes it (its connection-ttl) or the proxy stops.

    Counted: frames of ``direction`` whose packet ``requires_confirmations()``, on session channels
    (>= 10) or only on ``channel`` when given; with ``packet_types``, instead every frame of those types
    (confirmable or not), on any channel or only on ``channel``.  The count runs across connections from
    the moment the rule is installed.  The rule fires once.
    """

    confirmable_commands: int
    direction: str = "c2s"
    channel: int | None = None
    packet_types: AbstractSet[str] | None = None
    half_open: bool = False

    def __post_init__(self) -> None:
        if self.confirmable_commands < 0:
            raise ValueError(f"confirmable_commands must be >= 0, got {self.confirmable_commands}")
        object.__setattr__(self, "direction", _direction(self.direction))
        object.__setattr__(self, "packet_types", _types(self.packet_types))

    def budget(self) -> int | None:
        return 1

    def _counts(self, view: FrameView) -> bool:
        if self.direction not in ("both", view.direction):
            return False
        if self.packet_types is not None:
            return view.type_name in self.packet_types and (self.channel is None or view.channel == self.channel)
        if not view.confirmable:
            return False
        return view.channel == self.channel if self.channel is not None else view.channel >= _FIRST_SESSION_CHANNEL

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if handle.spent or not self._counts(view) or handle.counted < self.confirmable_commands:
            return None
        return Effect("cut", half_open=self.half_open)

    def describe(self) -> str:
        # a half-open cut's record, and every frame dropped after it, name it first: what the log's readers look for
        return f"{HALF_OPEN} {self!r}" if self.half_open else repr(self)

    def observe(self, view: FrameView, handle: RuleHandle, *, forwarded: bool) -> None:
        # Only frames that really went on count: one dropped by another rule never reached the peer.
        if forwarded and not handle.spent and self._counts(view):
            handle.counted += 1


@dataclass(frozen=True, slots=True)
class ResetDuringReattach(Rule):
    """Reset the connection (RST both sides) instead of forwarding a client's REATTACH_SESSION."""

    count: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _count(self.count, "count"))

    def budget(self) -> int | None:
        return self.count

    def effect(self, view: FrameView, handle: RuleHandle) -> Effect | None:
        if handle.spent or view.direction != "c2s" or view.type_name != "REATTACH_SESSION":
            return None
        return Effect("cut")


@dataclass(frozen=True, slots=True)
class RefuseConnections(Rule):
    """Accept new connections and reset them at once (RST); ``count`` bounds how many."""

    count: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _count(self.count, "count"))

    def budget(self) -> int | None:
        return self.count

    def connection_effect(self, handle: RuleHandle) -> Literal["refuse", "blackhole"] | None:
        return None if handle.spent else "refuse"


@dataclass(frozen=True, slots=True)
class Blackhole(Rule):
    """A pulled cable: current and new connections stop carrying bytes either way, nothing is
    closed.  A connection it caught stays dead after the rule is removed."""

    def connection_effect(self, handle: RuleHandle) -> Literal["refuse", "blackhole"] | None:
        return "blackhole"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The combined decision about one frame."""

    action: Action
    delay_s: float = 0.0
    copies: int = 1
    #: The rule(s) that shaped it, for the wire log.
    rule: str | None = None
    #: A cut that resets only the client's side (``Effect.half_open``).
    half_open: bool = False


_FORWARD = Verdict("forwarded")


def judge(handles: Sequence[RuleHandle], view: FrameView) -> Verdict:
    """Decide one frame's fate and update the handles' state accordingly."""
    effects = [(handle, effect) for handle in handles if (effect := handle.rule.effect(view, handle)) is not None]
    terminal = next(((h, e) for h, e in effects if e.kind in ("drop", "cut")), None)
    if terminal is not None:
        handle, effect = terminal
        handle._consume()
        verdict = Verdict("dropped" if effect.kind == "drop" else "cut", rule=handle.rule.describe(),
                          half_open=effect.half_open)
    elif effects:
        for handle, _ in effects:
            handle._consume()
        delay = sum(e.seconds for _, e in effects if e.kind == "delay")
        copies = 2 if any(e.kind == "duplicate" for _, e in effects) else 1
        action: Action = "duplicated" if copies == 2 else "delayed" if delay > 0 else "forwarded"
        verdict = Verdict(action, delay, copies, "; ".join(h.rule.describe() for h, _ in effects))
    else:
        verdict = _FORWARD
    forwarded = verdict.action not in ("dropped", "cut")
    for handle in handles:
        handle.rule.observe(view, handle, forwarded=forwarded)
    return verdict


def on_accept(handles: Sequence[RuleHandle]) -> Literal["refuse", "blackhole"] | None:
    """What happens to a newly accepted connection: the first connection rule that acts decides."""
    for handle in handles:
        outcome = handle.rule.connection_effect(handle)
        if outcome is not None:
            handle._consume()
            return outcome
    return None


def new_handle(rule: Rule, now_ns: int) -> RuleHandle:
    return RuleHandle(rule, now_ns, remaining=rule.budget())

