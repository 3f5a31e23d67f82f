"""The security family's examples: a realm (which of the two secured brokers) and one to three logins, each a set
of credentials and the operations then attempted as that session (create a durable or non-durable queue, send,
consume, browse), on a small fixed name space (:mod:`._security_oracle`).

Like the reliability family's :class:`~._model.Example`, a :class:`SecurityExample` is a frozen value with
``to_dict`` / ``from_dict`` (plain JSON, ``"family": "security"``), ``describe()`` and ``size``; any subsequence of
its logins, or of a login's attempts, is still a valid example, which is what shrinking relies on.
:func:`example_from_dict` reads either family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._model import Example, ExampleError
from ._security_oracle import CREDENTIALS, PLACES, QUEUES, REALMS, Place, Realm

__all__ = ["ACTIONS", "AnyExample", "Attempt", "Login", "SecurityExample", "example_from_dict"]

Action = Literal["send", "consume", "browse", "create-durable", "create-non-durable"]
#: what an attempt does, simplest first
ACTIONS: tuple[Action, ...] = ("send", "consume", "browse", "create-durable", "create-non-durable")
#: the most logins in one example, and attempts after one login: generous, since an attempt costs a few
#: milliseconds against a running broker and a mutant of the matching rules shows in only a few of the
#: (credentials, action, place) triples (hypothesis draws lists of about half their bound; shrinking cuts them)
MAX_LOGINS = 4
MAX_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class Attempt:
    """One operation on ``place`` (an index into :data:`PLACES`): creating a queue names a queue to create
    (``create-*``), the others an existing queue (:data:`QUEUES`)."""

    action: Action
    place: int

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ExampleError(f"action must be one of {', '.join(ACTIONS)}, got {self.action!r}")
        creating = self.action.startswith("create")
        low, high = (len(QUEUES), len(PLACES) - 1) if creating else (0, len(QUEUES) - 1)
        if not isinstance(self.place, int) or isinstance(self.place, bool) or not low <= self.place <= high:
            raise ExampleError(f"{self.action}: place must be an integer in [{low}, {high}], got {self.place!r}")

    @property
    def where(self) -> Place:
        return PLACES[self.place]

    @property
    def permission(self) -> str:
        """The permission the broker must check (the manual's permission list)."""
        return {
            "send": "send",
            "consume": "consume",
            "browse": "browse",
            "create-durable": "createDurableQueue",
            "create-non-durable": "createNonDurableQueue",
        }[self.action]

    @property
    def queue(self) -> str | None:
        """The queue the check names (None for a send, which names the address only)."""
        return None if self.action == "send" else self.where.queue

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "place": self.place}

    @classmethod
    def from_dict(cls, data: Any) -> Attempt:
        if not isinstance(data, Mapping) or set(data) != {"action", "place"}:
            raise ExampleError(f"an attempt is {{'action', 'place'}}, got {data!r}")
        return cls(data["action"], data["place"])

    def describe(self) -> str:
        return f"{self.action} {self.where.address if self.action == 'send' else self.where.describe()}"


@dataclass(frozen=True, slots=True)
class Login:
    """CREATESESSION with one of :data:`CREDENTIALS`, then ``attempts`` as that session."""

    credentials: str
    attempts: tuple[Attempt, ...] = ()

    def __post_init__(self) -> None:
        if self.credentials not in CREDENTIALS:
            raise ExampleError(f"credentials must be one of {', '.join(CREDENTIALS)}, got {self.credentials!r}")
        if len(self.attempts) > MAX_ATTEMPTS:
            raise ExampleError(f"a login has at most {MAX_ATTEMPTS} attempts, got {len(self.attempts)}")

    def to_dict(self) -> dict[str, Any]:
        return {"credentials": self.credentials, "attempts": [a.to_dict() for a in self.attempts]}

    @classmethod
    def from_dict(cls, data: Any) -> Login:
        if (
            not isinstance(data, Mapping)
            or set(data) != {"credentials", "attempts"}
            or not isinstance(data["attempts"], list)
        ):
            raise ExampleError(f"a login is {{'credentials', 'attempts': [...]}}, got {data!r}")
        return cls(data["credentials"], tuple(map(Attempt.from_dict, data["attempts"])))

    def describe(self) -> str:
        return f"login {self.credentials}" + "".join(f", {a.describe()}" for a in self.attempts)


@dataclass(frozen=True, slots=True)
class SecurityExample:
    """A security example: the realm's broker, and its logins in order on one connection."""

    realm: Realm
    logins: tuple[Login, ...]

    def __post_init__(self) -> None:
        if self.realm not in REALMS:
            raise ExampleError(f"realm must be one of {', '.join(REALMS)}, got {self.realm!r}")
        if not 1 <= len(self.logins) <= MAX_LOGINS:
            raise ExampleError(f"a security example has 1 to {MAX_LOGINS} logins, got {len(self.logins)}")

    def to_dict(self) -> dict[str, Any]:
        return {"family": "security", "realm": self.realm, "logins": [login.to_dict() for login in self.logins]}

    @classmethod
    def from_dict(cls, data: Any) -> SecurityExample:
        if (
            not isinstance(data, Mapping)
            or set(data) != {"family", "realm", "logins"}
            or data["family"] != "security"
            or not isinstance(data["logins"], list)
        ):
            raise ExampleError(
                f"a security example is {{'family': 'security', 'realm', 'logins': [...]}}, got {data!r}"
            )
        return cls(data["realm"], tuple(map(Login.from_dict, data["logins"])))

    def describe(self) -> str:
        return f"security ({self.realm}): " + "; ".join(login.describe() for login in self.logins)

    @property
    def size(self) -> tuple[int, int]:
        """(logins, attempts): what a minimal example keeps small."""
        return len(self.logins), sum(len(login.attempts) for login in self.logins)


AnyExample: TypeAlias = Example | SecurityExample


def example_from_dict(data: Any) -> AnyExample:
    """An example of either family, from its ``to_dict()``."""
    if isinstance(data, Mapping) and data.get("family") == "security":
        return SecurityExample.from_dict(data)
    return Example.from_dict(data)
