"""Shared fixtures: every test writes into its own temporary run directory."""

from __future__ import annotations

import pytest

from memcost.paths import RunPaths


@pytest.fixture
def run_paths(tmp_path) -> RunPaths:
    """A fresh, empty run directory under pytest's tmp_path."""
    return RunPaths(tmp_path / "run").ensure()
