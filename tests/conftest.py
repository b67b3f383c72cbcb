"""Fixtures shared by the test files.

- ``_default_gpu_env`` (autouse): every test starts with ``RANDFEAT_GPU``
  unset, so the developer's environment does not change which device
  ``"auto"`` picks; a test that needs it sets it with ``monkeypatch``.
- ``gpu_adapter``: the adapter's description (``randfeat_rs.gpu_info()``);
  the test fails when there is none. ``make test`` installs Mesa's software
  Vulkan driver (lavapipe) where no driver is present, so an absent adapter
  is a failure, not a skip.
- ``set_num_threads`` and ``set_gpu_chunk_bytes``: setters of the process-wide
  thread count and GPU chunk size that restore the previous value when the
  test ends (instead of a try/finally block in every test).
- ``run_forked``: runs a function in a process forked from the test's, and
  fails the test when the child hangs (for the fork-safety tests).
- ``yacht`` and ``yacht_subset``: the shipped yacht data, standardized.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import randfeat_rs as rf
from randfeat_rs import gpu as rgpu
from randfeat_rs.datasets import load_yacht

# The documented default of randfeat_rs.gpu.set_chunk_bytes (128 MiB).
DEFAULT_GPU_CHUNK_BYTES = 128 << 20


@pytest.fixture(autouse=True)
def _default_gpu_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANDFEAT_GPU", raising=False)


@pytest.fixture
def gpu_adapter() -> dict:
    """``randfeat_rs.gpu_info()``; fails the test when no adapter is usable."""
    info = rf.gpu_info()
    if info is None:
        pytest.fail("no GPU adapter: `make test` installs Mesa's lavapipe (mesa-vulkan-drivers)")
    return info


@pytest.fixture
def set_num_threads() -> Iterator[Callable[[int], None]]:
    """``randfeat_rs.set_num_threads``, with the thread count restored afterwards."""
    before = rf.get_num_threads()
    yield rf.set_num_threads
    rf.set_num_threads(before)


@pytest.fixture
def set_gpu_chunk_bytes() -> Iterator[Callable[[int], None]]:
    """``randfeat_rs.gpu.set_chunk_bytes``, with the default restored afterwards."""
    yield rgpu.set_chunk_bytes
    rgpu.set_chunk_bytes(DEFAULT_GPU_CHUNK_BYTES)


# Seconds a forked child may take before ``run_forked`` calls it hung.
FORK_TIMEOUT_S = 60


@pytest.fixture
def run_forked() -> Callable[[Callable[[Any], None]], tuple[int | None, Any]]:
    """``run(target)``: ``target(queue)`` in a forked child process; fails the
    test when the child is still running after ``FORK_TIMEOUT_S`` (it hung, and
    is killed), else returns the child's exit code and what it put on the queue."""

    def run(target: Callable[[Any], None]) -> tuple[int | None, Any]:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=target, args=(q,))
        p.start()
        p.join(timeout=FORK_TIMEOUT_S)
        if p.is_alive():
            p.kill()
            p.join()
            pytest.fail(f"the forked child hung (still running after {FORK_TIMEOUT_S} s)")
        try:
            return p.exitcode, q.get(timeout=5)
        except queue.Empty:
            pytest.fail(f"the forked child exited with code {p.exitcode} and no result")

    return run


@pytest.fixture
def yacht() -> tuple[np.ndarray, np.ndarray]:
    """The yacht data (308 x 6), inputs and targets standardized."""
    X, y = load_yacht()
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


@pytest.fixture
def yacht_subset(
    yacht: tuple[np.ndarray, np.ndarray],
) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """``yacht_subset(n)``: ``n`` standardized yacht rows in a fixed random
    order (C-contiguous copies)."""
    X, y = yacht

    def subset(n: int = 120) -> tuple[np.ndarray, np.ndarray]:
        idx = np.random.default_rng(0).permutation(X.shape[0])[:n]
        return np.ascontiguousarray(X[idx]), np.ascontiguousarray(y[idx])

    return subset
