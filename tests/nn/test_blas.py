"""numpy's BLAS is held to one thread during a policy's batched pass, and given back afterwards."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gymloop.nn import blas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [lib.get_num_threads() for lib in blas._blas_libraries()]


@pytest.fixture
def two_threads() -> object:
    libs = blas._blas_libraries()
    if not libs:
        pytest.skip("numpy's BLAS is not one threadpoolctl controls")
    before = _blas_threads()
    for lib in libs:
        lib.set_num_threads(2)
    yield
    for lib, n in zip(libs, before):
        lib.set_num_threads(n)


def test_one_thread_inside_and_the_count_restored_after(two_threads: object) -> None:
    with blas.one_blas_thread():
        assert _blas_threads() == [1] * len(_blas_threads())
        with blas.one_blas_thread():  # nested passes
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}


def test_restored_when_the_pass_raises(two_threads: object) -> None:
    with pytest.raises(ZeroDivisionError):
        with blas.one_blas_thread():
            1 / 0  # noqa: B018
    assert set(_blas_threads()) == {2}


def test_the_policy_batched_pass_runs_on_one_blas_thread(two_threads: object) -> None:
    from gymloop.nn.numpy_policy import NumpyPolicy

    seen: list[list[int]] = []

    @blas.single_blas_thread
    def probe() -> None:
        seen.append(_blas_threads())

    probe()
    assert set(seen[0]) == {1} and set(_blas_threads()) == {2}
    assert hasattr(NumpyPolicy.logits, "__wrapped__")  # the batched pass is decorated


def test_threads_running_passes_together_restore_the_count(two_threads: object) -> None:
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for _ in range(200):
            with blas.one_blas_thread():
                np.ones((8, 8), np.float32) @ np.ones((8, 8), np.float32)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert set(_blas_threads()) == {2}
