"""Fixtures and hooks for every test. Shared test games, entity types and helpers live in :mod:`support`."""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis
import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis writes no example database into the working tree, and CI timing noise is not a failure.
    hypothesis.settings.register_profile("gymloop", database=None, deadline=None)
    hypothesis.settings.load_profile("gymloop")


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Stable-Baselines3's ``learn`` makes a log folder, by default a new ``SB3-<time>`` in the system's
    temporary folder that nobody removes: the tests' go under pytest's own temporary folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3")))
        yield


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One torch intra-op thread for the module: more only add overhead on the tests' tiny batches."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
