"""Conformance kit: pytest plugin, targets, fault proxy, oracles and the Artemis helpers."""
