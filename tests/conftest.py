"""Fixtures and hooks for every test. Shared test games, entity types and helpers live in :mod:`support`."""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis
import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis writes no example database into the working tree, and CI timing noise is not a failure.
    hypothesis.settings.register_profile("gymloop", database=None, deadline=None)
    hypothesis.settings.load_profile("gymloop")


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One torch intra-op thread for the module: more only add overhead on the tests' tiny batches."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
