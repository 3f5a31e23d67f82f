"""The conformance suite: one module per case group (run with ``pytest --pyargs conformance.suite``)."""
