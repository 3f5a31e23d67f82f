"""The security family's fixed configuration and the oracle that predicts, from it alone, whether each attempt must
be allowed or refused.

The model is table-driven and written from the Artemis user manual, not from the reference broker (whose code the
security mutants change: a model importing it would agree with the mutant).  Each rule cites its source:

* **authentication** (manual, Security, "JAAS Login Modules"; clause ``security.authentication``): a
  PropertiesLoginModule admits a known user whose password matches, with that user's roles.  In the ``strict`` realm
  it is ``required``: when it fails the login is refused (a wrong password, an empty one, an unknown user, no
  credentials at all).
* **guest** (manual, "GuestLoginModule"; clause ``security.anonymous``): in the ``guest`` realm the properties module
  and a GuestLoginModule are both ``sufficient`` (the manual's first guest example): valid credentials log in as that
  user; anything else (no credentials, a wrong or blank password, an unknown user) logs in as the guest user with the
  guest role, since ``credentialsInvalidate`` defaults to false.
* **most specific match** (manual, "Role based security for addresses": "the more specific match takes precedence",
  "settings are not inherited"; clause ``security.match``): one security-setting decides, the most specific that
  matches; an exact match beats a wildcard one, a ``*`` match one with ``#``, and of two ``#`` matches the longer.
  The configuration below only ever compares matches of those kinds (``test_no_ambiguous_match`` checks that).
* **wildcards** (manual, "Wildcard Syntax"): words are separated by ``.``; ``*`` matches exactly one word, ``#`` any
  sequence of zero or more words.
* **fully qualified queue names** (manual, "Fine-grained security using fully qualified queue name"; clause
  ``security.fqqn``): a setting whose match is exactly ``address::queue`` decides for that queue only; there is no
  wildcard matching with FQQN.
* **which permission** (manual's permission list; clause ``security.authorization``): a send needs ``send`` on the
  address; a consumer ``consume``, a browse-only consumer ``browse`` (on the queue's address, and its FQQN); creating
  a queue ``createDurableQueue`` or ``createNonDurableQueue`` after the queue's durability.  A user is granted a
  permission when one of its roles is listed for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cck.conformance.targets import PERMISSIONS, SecurityRule, SecuritySpec, Topology, User

__all__ = [
    "ADDRESSES", "ADMIN", "CREDENTIALS", "GUEST_ROLE", "GUEST_USER", "NEW_QUEUES", "PLACES", "QUEUES", "REALMS",
    "SETTINGS", "USERS", "Identity", "Place", "Realm", "authenticate", "authorize", "decides", "matches",
    "security_topology", "shares_cached_name",
]  # fmt: skip

Realm = Literal["strict", "guest"]
REALMS: tuple[Realm, ...] = ("strict", "guest")

PREFIX = "cck.sx"
ADMIN = User("sx-admin", "admin-secret", ("admin",))
USERS = (
    ADMIN,
    User("wendy", "wendy-secret", ("wide",)),
    User("bob", "bob-secret", ("browser",)),
    User("tara", "tara-secret", ("temp",)),
)
GUEST_USER = "guest"
GUEST_ROLE = "guests"

#: the credentials a login may present, simplest first: (user, password)
CREDENTIALS: Mapping[str, tuple[str | None, str | None]] = {
    "wendy": ("wendy", "wendy-secret"),
    "bob": ("bob", "bob-secret"),
    "tara": ("tara", "tara-secret"),
    "wendy-wrong": ("wendy", "wrong-password"),
    "bob-empty": ("bob", ""),
    "stranger": ("stranger", "whatever"),
    "anonymous": (None, None),
}

_A, _AB, _S, _F = f"{PREFIX}.a", f"{PREFIX}.a.b", f"{PREFIX}.s", f"{PREFIX}.f"
#: the fully qualified address's two queues (multicast)
F_QUEUES = ("sx-f1", "sx-f2")

#: security-setting match -> permission -> roles.  Every block grants the administrator everything again (nothing
#: is inherited), and each differs from the blocks it overlaps in what a mutant's wrong choice would change.
SETTINGS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "#": {},
    f"{_A}.#": {
        "send": ("wide", "temp", GUEST_ROLE),
        "consume": ("wide",),
        "browse": ("wide", "browser"),
        "createDurableQueue": ("wide",),
        "createNonDurableQueue": ("wide", "temp", GUEST_ROLE),
    },
    f"{_AB}.#": {
        "consume": ("wide", "browser"),
        "browse": ("browser",),
        "createDurableQueue": ("temp",),
        "createNonDurableQueue": ("temp", "browser"),
    },
    f"{_S}.*": {
        "send": ("wide", "temp", GUEST_ROLE),
        "consume": (GUEST_ROLE, "wide"),
        "browse": ("browser", GUEST_ROLE),
        "createNonDurableQueue": ("wide",),
    },
    _F: {
        "send": ("wide",),
        "consume": ("wide", GUEST_ROLE),
        "browse": ("wide", "browser"),
        "createNonDurableQueue": ("temp", GUEST_ROLE),
    },
    f"{_F}::{F_QUEUES[0]}": {"consume": ("browser",), "browse": ("browser",), "createDurableQueue": ("temp",)},
}


@dataclass(frozen=True, slots=True)
class Place:
    """A queue of the name space: its address and name, and the routing type of both."""

    address: str
    queue: str
    routing: Literal["anycast", "multicast"] = "anycast"

    def describe(self) -> str:
        return self.queue if self.queue == self.address else f"{self.address}::{self.queue}"


#: the queues the attempts send to, consume from and browse (the administrator makes them before each run): the
#: address under both ``a.#`` and ``a.b.#``, one under ``a.#`` only (zero words after it), one word under ``s.``
#: (``s.*``) and two (only ``#``), and the two queues of the fully qualified address
QUEUES: tuple[Place, ...] = (
    Place(_AB, _AB),
    Place(_A, _A),
    Place(f"{_AB}.c", f"{_AB}.c"),
    Place(f"{_A}.x", f"{_A}.x"),
    Place(f"{_S}.x", f"{_S}.x"),
    Place(f"{_S}.x.y", f"{_S}.x.y"),
    Place(_F, F_QUEUES[0], "multicast"),
    Place(_F, F_QUEUES[1], "multicast"),
)
#: the addresses (each queue's, once)
ADDRESSES: tuple[str, ...] = tuple(dict.fromkeys(p.address for p in QUEUES))
#: per address, the queue a create attempt makes there (the administrator deletes it before each run)
NEW_QUEUES: tuple[Place, ...] = tuple(
    Place(address, f"{address}-new" if address != _F else "sx-f-new", "multicast" if address == _F else "anycast")
    for address in ADDRESSES
)
#: every place an attempt may name: the existing queues, then the queues to create
PLACES = QUEUES + NEW_QUEUES


def security_topology(realm: Realm) -> Topology:
    """The broker configuration of ``realm``: these users and settings; ``guest`` adds a guest login module."""
    rules = tuple(
        SecurityRule(match, permission, ("admin", *grants.get(permission, ())))
        for match, grants in SETTINGS.items()
        for permission in PERMISSIONS
    )
    return Topology(
        security=SecuritySpec(
            enabled=True, users=USERS, rules=rules, guest_role=GUEST_ROLE if realm == "guest" else None
        )
    )


# ---------------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a session is: the user name it logged in as (the guest's for a guest login), its roles, and the name
    it claimed in CREATESESSION (what Artemis 2.44.0 keys its authorisation cache by)."""

    user: str
    roles: frozenset[str]
    claimed: str | None


def authenticate(realm: Realm, credentials: str) -> Identity | None:
    """The identity the realm's login modules give these credentials, or None when the login must be refused."""
    user, password = CREDENTIALS[credentials]
    known = {u.name: u for u in USERS}
    entry = known.get(user) if user is not None else None
    if entry is not None and password == entry.password:
        return Identity(entry.name, frozenset(entry.roles), user)
    if realm == "guest":  # both modules sufficient: what the properties module refuses, the guest module admits
        return Identity(GUEST_USER, frozenset({GUEST_ROLE}), user)
    return None  # the properties module is required


def matches(match: str, address: str) -> bool:
    """Whether a wildcard ``match`` applies to ``address``: ``*`` one word, ``#`` zero or more (at the end only)."""
    pattern, words = match.split("."), address.split(".")
    if pattern[-1] == "#":
        head = pattern[:-1]
        return len(words) >= len(head) and all(p in ("*", w) for p, w in zip(head, words, strict=False))
    return len(words) == len(pattern) and all(p in ("*", w) for p, w in zip(pattern, words, strict=True))


def _specificity(match: str, address: str) -> tuple[int, int]:
    """Smaller is more specific: an exact match, then ``*`` matches, then ``#`` ones (longer first)."""
    if match == address:
        return (0, 0)
    kind = 2 if match.endswith("#") else 1
    return (kind, -len(match.split(".")))


Settings = Mapping[str, Mapping[str, tuple[str, ...]]]


def decides(address: str, queue: str | None = None, *, settings: Settings = SETTINGS) -> str | None:
    """The match of the security-setting that decides for ``address`` (and ``queue``): an exact FQQN setting, else
    the most specific match of the address (None: no setting matches)."""
    if queue is not None and f"{address}::{queue}" in settings:
        return f"{address}::{queue}"
    wild = [m for m in settings if "::" not in m and ("*" in m or "#" in m) and matches(m, address)]
    candidates = ([address] if address in settings else []) + wild
    return min(candidates, key=lambda m: _specificity(m, address)) if candidates else None


def authorize(
    identity: Identity, permission: str, address: str, queue: str | None = None, *, settings: Settings = SETTINGS
) -> bool:
    """Whether ``identity`` holds ``permission`` on ``address`` (and ``queue``): one of its roles is granted it by
    the deciding setting (the administrator's role by every one of :data:`SETTINGS`); no setting: refused."""
    match = decides(address, queue, settings=settings)
    if match is None:
        return False
    return bool(({"admin", *settings[match].get(permission, ())}) & identity.roles)


def shares_cached_name(
    realm: Realm, identity: Identity, permission: str, address: str, queue: str | None = None
) -> bool:
    """Whether Artemis 2.44.0's known deviation (``security.anonymous.3``: grants cached under the user name claimed
    in CREATESESSION, not under who logged in) can explain an allowance the model refuses: in the guest realm,
    another identity that claims the same name (the guest under a real user's name, or that user) holds it."""
    if realm != "guest" or identity.claimed is None:
        return False
    others = [Identity(GUEST_USER, frozenset({GUEST_ROLE}), identity.claimed)]
    known = {u.name: u for u in USERS}
    if identity.claimed in known:
        user = known[identity.claimed]
        others.append(Identity(user.name, frozenset(user.roles), user.name))
    return any(other.roles != identity.roles and authorize(other, permission, address, queue) for other in others)
