"""Fixtures the case modules share (pytest loads this file for every module of the suite)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cck.conformance.plugin import TargetFactory

from ._cluster_kit import RevivingPool


@pytest.fixture(scope="module")
def clusters(cck_targets: TargetFactory) -> Iterator[RevivingPool]:
    """The cluster groups' running cluster, one per module: a case asks it for a topology (see ``ClusterPool``);
    nodes a case stopped are started again for the next one."""
    pool = RevivingPool(cck_targets)
    try:
        yield pool
    finally:
        pool.close()
