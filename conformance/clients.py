"""Clients under test: the subject of the client cases (``Case.subject == "client"``).

Broker cases probe the broker with the kit's own client as an instrument; client cases judge a client: its
backoff schedule, its failure listener, its replay, its load balancing, its ``udp://`` discovery.  A client run
names the client it judges::

    --client kit              the kit's own client (reference.client)
    --client artemis@2.44.0   the stock Apache Artemis core client of a pinned version, driven by the kit's
                              Java harness (fixtures/java); ``artemis`` alone is the pins' default version

A case the client under test cannot be driven through says so with :meth:`ClientUnderTest.require_kit`, and is
UNSUPPORTED for that client (never a FAIL of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cck.conformance.verdicts import unsupported

__all__ = ["ClientUnderTest", "ClientKind", "CLIENT_KINDS", "parse_client"]

ClientKind = Literal["kit", "artemis"]
CLIENT_KINDS: tuple[ClientKind, ...] = ("kit", "artemis")


@dataclass(frozen=True)
class ClientUnderTest:
    kind: ClientKind
    #: The pinned Artemis version of a stock client; None for the kit's client.
    version: str | None = None

    @property
    def name(self) -> str:
        """``kit`` or ``artemis@<version>``: how the option, the evidence and the reports name it."""
        return self.kind if self.version is None else f"{self.kind}@{self.version}"

    @property
    def is_kit(self) -> bool:
        return self.kind == "kit"

    def describe(self) -> str:
        return "the kit's client" if self.is_kit else f"the stock Apache Artemis {self.version} client"

    def require_kit(self, why: str) -> None:
        """UNSUPPORTED unless the client under test is the kit's: ``why`` says what the case drives that the
        kit's harness for the stock client cannot."""
        if not self.is_kit:
            unsupported(f"{self.describe()} cannot be driven here: {why}")


def parse_client(text: str, default_version: str, pinned: Sequence[str]) -> ClientUnderTest:
    """``kit``, ``artemis`` or ``artemis@V`` (V a pinned version); ValueError saying what is accepted."""
    kind, _, version = text.strip().partition("@")
    if kind == "kit" and not version:
        return ClientUnderTest("kit")
    if kind == "artemis":
        version = version or default_version
        if version not in pinned:
            raise ValueError(f"Artemis {version} is not pinned: use one of {', '.join(pinned)} "
                             "(pins: fixtures/artemis/versions.json)")
        return ClientUnderTest("artemis", version)
    raise ValueError("is not a client: use kit, artemis or artemis@<pinned version>")
