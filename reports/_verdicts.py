"""The verdicts and subjects the reports know (no pyspark here: the site and the generator use them too).

Severity, worst first, is the order a modal tie is broken in and the order the summaries list the verdicts:

* FAIL: a finding about the subject, the one verdict that says it does not conform;
* KIT_ERROR: the kit itself erred, so the case says nothing about the subject; a defect to fix before the
  case can judge anything, worse than INDETERMINATE (the kit worked but could not tell), as in the exit
  status of a run (1 FAIL before 3 KIT_ERROR before 2 INDETERMINATE);
* INDETERMINATE, PASS_LENIENT, UNSUPPORTED, PASS.
"""

from __future__ import annotations

__all__ = ["CONFORMING", "DIFF_STATUSES", "SUBJECTS", "VERDICTS"]

#: The kit's verdicts, worst first.
VERDICTS = ("FAIL", "KIT_ERROR", "INDETERMINATE", "PASS_LENIENT", "UNSUPPORTED", "PASS")

#: What a case judges: the broker (the target) or a client; a case record without a subject is a broker case.
SUBJECTS = ("broker", "client")

#: The verdicts that say the subject conforms (the heat map's share and the trends count these).
CONFORMING = ("PASS", "PASS_LENIENT")

#: A version diff row's status (``reports._diff``), in the order the diff page lists them: what changed first.
DIFF_STATUSES = ("differs", "only left", "only right", "same")
