"""``python -m reference broker``: run the reference broker."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
import uuid
from pathlib import Path

from ._logging import configure_logging
from ._server import BrokerServer
from .broker import BrokerCore, BrokerSettings

DESCRIPTION = """\
The Core Conformance Kit's reference broker for the Apache ActiveMQ Artemis
core protocol.  Without --config it runs the embedded default: an acceptor on
127.0.0.1:61616, anonymous access, addresses and queues created on demand,
data under ./data.  Stop it with SIGTERM or Ctrl-C: clients get DISCONNECT.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reference", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    broker = commands.add_parser("broker", help="run the broker until SIGTERM/SIGINT", description=DESCRIPTION)
    broker.add_argument("--host", default="127.0.0.1", help="acceptor address (default 127.0.0.1)")
    broker.add_argument("--port", type=int, default=61616, help="acceptor port (default 61616; 0 picks one)")
    broker.add_argument("--data", type=Path, default=Path("data"), help="data directory (default ./data)")
    broker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


async def _run(args: argparse.Namespace) -> int:
    settings = BrokerSettings(node_id=str(uuid.uuid4()))
    core = BrokerCore(settings, wall_clock_ms=lambda: int(time.time() * 1000))
    server = BrokerServer(core, args.host, args.port)
    await server.start()
    print(f"reference broker listening on {args.host}:{server.bound_port}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        return asyncio.run(_run(args))
    except OSError as exc:
        print(f"reference broker: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
