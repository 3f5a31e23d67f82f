"""The clause table: what each conformance case checks, quoted, with its source and level.

One TOML file per case group in this directory (``reattach.toml``, ``window.toml``, ...)::

    [[clause]]
    id = "reattach.replay"                       # unique across all files
    level = "MUST"                               # MUST | SHOULD | MAY
    source = "spec 000 (Client Reconnection and Session Reattachment), paragraph 3"
    text = \"\"\"the quoted clause\"\"\"
    implementation = \"\"\"optional: what Artemis does where it disagrees with the text\"\"\"
    implementation_source = "optional: where that is seen (notes section, source file)"

A case citing a clause that records an ``implementation`` says which side it checks (``Case.checks``).
"""

from __future__ import annotations

from ._table import CLAUSE_DIR, LEVELS, Clause, ClauseError, Level, is_url, load_clauses

__all__ = ["Clause", "ClauseError", "Level", "LEVELS", "CLAUSE_DIR", "load_clauses", "is_url"]
