"""The secured brokers the security family runs against: for a managed target (the reference broker, a pinned
Artemis), one more broker of the same kind per realm, configured with :func:`._security_oracle.security_topology`.

They are brokers of their own, not the reliability family's: that broker keeps security off, so its examples run
exactly as before, and each realm needs its own JAAS login configuration (the properties module ``required`` in the
strict realm, ``sufficient`` beside a guest module in the guest realm), which a broker has only one of.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType
from typing import TextIO

from cck.conformance.targets import Target, TargetError, make_target

from ._security_oracle import REALMS, Realm, security_topology

__all__ = ["MANAGED", "SecuredBrokers"]

#: the target kinds the kit configures (a bare URL's users are unknown to it: no security examples there)
MANAGED = ("reference", "artemis")


class SecuredBrokers:
    """A context manager: on entry, starts one broker per realm (``TargetError`` when one does not start, the others
    closed again); ``urls`` maps each realm to its broker; on exit, closes them."""

    def __init__(self, kind: str, version: str | None, workdir: Path, err: TextIO) -> None:
        self.kind, self.version, self.workdir, self.err = kind, version, workdir, err
        self.urls: dict[Realm, str] = {}
        self._targets: list[Target] = []

    def __enter__(self) -> SecuredBrokers:
        try:
            for realm in REALMS:
                directory = self.workdir / f"security-{realm}"
                directory.mkdir(parents=True, exist_ok=True)
                target = make_target(
                    self.kind, version=self.version, workdir=directory, topology=security_topology(realm)
                )
                self._targets.append(target)
                print(f"starting the {self.kind} target secured for the {realm} realm ...", file=self.err, flush=True)
                target.start()
                self.urls[realm] = target.url
        except TargetError:
            self.close()
            raise
        return self

    def close(self) -> None:
        for target in reversed(self._targets):
            with contextlib.suppress(Exception):
                target.close()
        self._targets.clear()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
