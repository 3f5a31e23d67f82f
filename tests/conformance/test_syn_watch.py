"""The SYN watch the stock-client backoff rows time attempts with: a refused connect is recorded once the
watch has read its queue, even when asked the moment the connect failed (the race a CI run once lost)."""

from __future__ import annotations

import socket
import time

import pytest

from conformance.suite._backoff_syn import SynWatch, syn_watch_available

pytestmark = pytest.mark.skipif(syn_watch_available() is not None, reason=str(syn_watch_available()))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_refused_connect_is_recorded_when_asked_right_after_it_failed() -> None:
    port = _closed_port()
    with SynWatch({port}) as watch:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", port))
        failed_ns = time.monotonic_ns()
        records = watch.records_until(failed_ns, 5.0)
    assert [r.dport for r in records] == [port]


def test_syns_to_other_ports_are_not_recorded() -> None:
    watched, other = _closed_port(), _closed_port()
    with SynWatch({watched}) as watch:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", other))
        assert watch.records_until(time.monotonic_ns(), 5.0) == []
