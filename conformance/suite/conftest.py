"""Fixtures the case modules share (pytest loads this file for every module of the suite)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cck.conformance.plugin import Settings

from ._cluster_kit import RevivingPool


@pytest.fixture(scope="module")
def clusters(cck_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RevivingPool]:
    """The cluster groups' running cluster, one per module: a case asks it for a topology (see ``ClusterPool``);
    nodes a case stopped are started again for the next one."""
    pool = RevivingPool(cck_settings, tmp_path_factory.mktemp)
    try:
        yield pool
    finally:
        pool.close()
