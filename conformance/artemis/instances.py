"""Artemis instances made the way an operator makes them (``artemis create``), with a target file that lets the
kit run the suite against them through commands only: ``python -m cck.conformance.artemis instances``.

The kit's managed ``artemis`` target never runs here: the instances are the distribution's own, the target file
is the documented example (``fixtures/targets/artemis-local.toml``) with their directory and ports filled in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cck.conformance.artemis.distribution import ArtemisError, Distribution
from cck.conformance.targets import example_text

__all__ = ["CREATE_TIMEOUT_S", "EXAMPLE", "make_instances"]

CREATE_TIMEOUT_S = 120.0
#: The documented target file for instances on this machine.
EXAMPLE = "artemis-local.toml"


def make_instances(dist: Distribution, root: Path, ports: list[int]) -> Path:
    """``artemis create`` one instance per port under ``root`` (``root/node0``, ...), and write
    ``root/target.toml``; its path.  ArtemisError naming the instance when ``artemis create`` fails."""
    root = root.absolute()
    root.mkdir(parents=True, exist_ok=True)
    for index, port in enumerate(ports):
        instance = root / f"node{index}"
        argv = [str(dist.home / "bin" / "artemis"), "create", "--silent", "--force", "--user", "admin",
                "--password", "admin", "--allow-anonymous", "--no-web", "--no-autotune", "--host", "127.0.0.1",
                "--default-port", str(port), "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
                "--no-hornetq-acceptor", str(instance)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=CREATE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ArtemisError(f"artemis create {instance} took more than {CREATE_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            raise ArtemisError(f"artemis create {instance} exited with {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
        (instance / "log").mkdir(exist_ok=True)
    path = root / "target.toml"
    path.write_text(example_text(EXAMPLE, variables={"root": str(root)}, ports=ports, version=dist.version),
                    encoding="utf-8")
    return path
