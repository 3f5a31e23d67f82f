"""Client settings, named and defaulted as Artemis's ServerLocator names them (notes §11.1, §14)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cck.codec import CURRENT_VERSION, HORNETQ_PREAMBLE, PREAMBLE

from .._tls import KeyStore, TlsConfigError, TrustStore, client_context, parse_protocols
from ._balance import ROUND_ROBIN, check_policy_class_name

__all__ = ["FIRST_ARTEMIS_PREAMBLE_VERSION", "PREAMBLES", "ClientSettings"]

#: The first protocol version whose released client writes ``ARTEMIS`` first (Artemis 1.0.0, 126).  HornetQ's
#: clients up to 2.4.x (protocol <= 124) write ``HORNETQ``; 125 was never released, and the code that carried it
#: still wrote ``HORNETQ`` (Artemis commit f07af67, May 2015, switched the handshake after 126 was in).
FIRST_ARTEMIS_PREAMBLE_VERSION = 126
#: The preambles a client may be told to write: Artemis's, HornetQ's, or none.  None is what Artemis's own
#: HornetQ client (``HornetQClientProtocolManager``, chosen with ``protocolManagerFactoryStr``) does: the
#: server sees no known handshake and falls back to the core protocol without skipping anything.
PREAMBLES = (PREAMBLE.decode("ascii"), HORNETQ_PREAMBLE.decode("ascii"), "")


@dataclass(frozen=True)
class ClientSettings:
    """Everything the client's behaviour depends on; times in milliseconds as Artemis has them."""

    #: Protocol version announced in SUBSCRIBE_TOPOLOGY_V2 and CREATESESSION; it also caps every version-gated
    #: packet the client writes or expects (a client of version 128 writes what Artemis 1.5.6's client writes).
    version: int = CURRENT_VERSION
    #: The bytes written before the first frame: ``"ARTEMIS"``, ``"HORNETQ"`` or ``""`` (none); ``None`` (the
    #: default) picks what the released client of ``version`` wrote (:meth:`preamble_bytes`).  Not an Artemis
    #: URL parameter (Artemis switches handshakes by swapping its whole protocol manager); the URL spelling is
    #: ``preamble=HORNETQ``.
    preamble: str | None = None
    #: Blocking calls fail after this long (Artemis ``callTimeout``).
    call_timeout_ms: int = 30_000
    #: Sent in every PING; the broker drops the connection after this long without bytes (-1: never).
    connection_ttl_ms: int = 60_000
    #: PING period, also the failure-check period (-1: only the initial PING).
    client_failure_check_period_ms: int = 30_000
    #: Bytes per PACKETS_CONFIRMED; -1 disables the confirmation window and reattachment.
    confirmation_window_size: int = -1
    #: Producer credits requested per address (-1: no producer flow control).
    producer_window_size: int = 64 * 1024
    #: Consumer credits in bytes (-1: unbounded, 0: one message at a time).
    consumer_window_size: int = 1024 * 1024
    block_on_durable_send: bool = True
    block_on_non_durable_send: bool = False
    block_on_acknowledge: bool = False
    min_large_message_size: int = 100 * 1024
    #: Wait this long for the topology message with ``last=true`` after subscribing (notes §7.1 step 5).
    topology_timeout_ms: int = 30_000
    # Reconnection (notes §11.1): the first wait, its growth factor and cap, and how many attempts.
    retry_interval_ms: int = 2_000
    retry_interval_multiplier: float = 1.0
    max_retry_interval_ms: int = 2_000
    #: 0 = never reconnect, -1 = forever, N = N attempts.
    reconnect_attempts: int = 0
    #: 0 behaves like 1, -1 = forever.
    initial_connect_attempts: int = 1
    #: How long a call waits while the connection is being re-established (-1 = forever).
    call_failover_timeout_ms: int = 30_000
    # Client-side load balancing (spec 002 "Client-Side Load balancing"): which node each new connection of a
    # locator goes to, and whether it chooses among the topology's members once it has received a topology.
    connection_load_balancing_policy_class_name: str = ROUND_ROBIN
    use_topology_for_load_balancing: bool = True
    # TLS: Artemis's Netty connector parameters, named and defaulted as TransportConstants (TC) has them; the
    # stores' formats are reference._tls's (PKCS12 and PEM; a JKS-format file is refused).  In Artemis each
    # connector carries its own; the kit's client uses these for every connector of the locator (see _aio.py).
    ssl_enabled: bool = False  # TC DEFAULT_SSL_ENABLED
    #: the authorities the broker's certificate must chain to; None: the system's (as a JVM's default trust store)
    trust_store_path: str | None = None
    trust_store_password: str | None = field(default=None, repr=False)
    #: None: TC DEFAULT_TRUSTSTORE_TYPE, JKS (a PKCS#12 file is read under that name, as a JVM reads it)
    trust_store_type: str | None = None
    #: the client's own certificate, for an acceptor with needClientAuth
    key_store_path: str | None = None
    key_store_password: str | None = field(default=None, repr=False)
    key_store_type: str | None = None
    #: check nothing of the broker's certificate (TC DEFAULT_TRUST_ALL false; Artemis's testing switch)
    trust_all: bool = False
    #: the broker's certificate must name the host connected to (TC DEFAULT_CONNECTOR_VERIFY_HOST: true since 2.18.0)
    verify_host: bool = True
    #: ``TLSv1.2,TLSv1.3``: the versions offered (a range); None: ssl's defaults
    enabled_protocols: str | None = None

    def __post_init__(self) -> None:
        for name in ("call_timeout_ms", "topology_timeout_ms", "retry_interval_ms", "max_retry_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ClientSettings.{name} must be > 0, got {getattr(self, name)}")
        if self.retry_interval_multiplier <= 0:
            raise ValueError(
                f"ClientSettings.retry_interval_multiplier must be > 0, got {self.retry_interval_multiplier}")
        for name in ("connection_ttl_ms", "client_failure_check_period_ms", "confirmation_window_size",
                     "producer_window_size", "consumer_window_size", "reconnect_attempts",
                     "initial_connect_attempts", "call_failover_timeout_ms"):
            if getattr(self, name) < -1:
                raise ValueError(f"ClientSettings.{name} must be >= -1, got {getattr(self, name)}")
        if self.preamble is not None and self.preamble not in PREAMBLES:
            raise ValueError(f"ClientSettings.preamble must be one of {', '.join(map(repr, PREAMBLES))} "
                             f"(or None: chosen by the version), got {self.preamble!r}")
        try:
            check_policy_class_name(self.connection_load_balancing_policy_class_name)
        except ValueError as exc:
            raise ValueError(f"ClientSettings.connection_load_balancing_policy_class_name: {exc}") from None
        try:
            parse_protocols(self.enabled_protocols)
        except TlsConfigError as exc:
            raise ValueError(f"client parameter {exc}") from None

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context every connection of these settings uses (None without ``sslEnabled``); it reads the
        stores now: a :class:`ValueError` naming the parameter and the file when one cannot be used."""
        if not self.ssl_enabled:
            return None
        trust = None if self.trust_store_path is None else TrustStore(
            self.trust_store_path, self.trust_store_password, self.trust_store_type)
        key = None if self.key_store_path is None else KeyStore(
            self.key_store_path, self.key_store_password, self.key_store_type)
        try:
            return client_context(trust, key, trust_all=self.trust_all, verify_host=self.verify_host,
                                  protocols=parse_protocols(self.enabled_protocols))
        except TlsConfigError as exc:
            raise ValueError(f"client parameter {exc}") from None

    def preamble_bytes(self) -> bytes:
        """What to write before the first frame: the explicit ``preamble``, else ``HORNETQ`` for a version a
        HornetQ client spoke (< 126) and ``ARTEMIS`` from Artemis 1.0.0's 126 on."""
        if self.preamble is not None:
            return self.preamble.encode("ascii")
        return HORNETQ_PREAMBLE if self.version < FIRST_ARTEMIS_PREAMBLE_VERSION else PREAMBLE

    def with_params(self, params: dict[str, str]) -> ClientSettings:
        """Apply URL query parameters named as Artemis names them (``confirmationWindowSize=...``)."""
        known = {_camel(f.name): f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, text in params.items():
            field_ = known.get(key)
            if field_ is None:
                raise ValueError(f"unknown client parameter {key!r} (known: {', '.join(sorted(known))})")
            if field_.name == "connection_load_balancing_policy_class_name":
                try:
                    changes[field_.name] = check_policy_class_name(text)
                except ValueError as exc:
                    raise ValueError(f"client parameter {key}: {exc}") from None
                continue
            try:
                changes[field_.name] = _PARSERS[str(field_.type)](text)
            except ValueError:
                raise ValueError(f"client parameter {key}={text!r} is not a valid {field_.type}") from None
        return replace(self, **changes)


def _camel(name: str) -> str:
    """``call_timeout_ms`` -> ``callTimeout`` (the URL spelling)."""
    if name.endswith("_ms"):
        name = name[:-3]
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(text)


_PARSERS: dict[str, Any] = {"bool": _parse_bool, "int": int, "float": float, "str | None": str}
