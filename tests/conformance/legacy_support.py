"""What the tests of the older servers (HornetQ 2.4.7.Final, Artemis 1.5.6) share: the skip when Java or Maven is
missing, the launcher of each kind, and one server run from a JSON configuration as a process the kit reads."""

from __future__ import annotations

import collections
import json
import re
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from cck.conformance.targets._legacy_launch import LEGACY_SERVERS, LegacyLaunch, ensure_legacy, legacy_argv
from cck.conformance.targets._process import BrokerProcess

__all__ = ["KINDS", "STOP_DEADLINE_S", "LegacyProcess", "launch", "needs_legacy"]

MISSING = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
needs_legacy = pytest.mark.skipif(
    bool(MISSING), reason=f"the legacy servers need a JDK 17+ and Maven: {', '.join(MISSING)} not on PATH")

KINDS = sorted(LEGACY_SERVERS)
STOP_DEADLINE_S = 60.0


@pytest.fixture(scope="module", params=KINDS)
def launch(request: pytest.FixtureRequest) -> LegacyLaunch:
    """The launcher of each kind in turn (resolved and compiled once per module)."""
    return ensure_legacy(str(request.param))


class LegacyProcess:
    """One run of a server: its configuration written to ``config_file``, its output read by a BrokerProcess whose
    first line of interest is ``ready``."""

    def __init__(self, launch: LegacyLaunch, config: dict[str, Any], config_file: Path, log_file: Path, *,
                 ready: re.Pattern[str], tail_lines: int) -> None:
        self.port = int(config["port"])
        config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self.process = BrokerProcess(legacy_argv(launch, config_file), ready=ready, log_file=log_file,
                                     tail=self.tail, label=f"legacy {launch.server.kind}")

    def stop(self) -> int | None:
        """SIGTERM, then the exit code (None, and killed, when it did not exit within STOP_DEADLINE_S)."""
        self.process.signal_group(signal.SIGTERM)
        code = self.process.wait(STOP_DEADLINE_S)
        if code is None:
            self.process.kill(STOP_DEADLINE_S)
        return code

    def log(self) -> str:
        return "".join(self.tail)
