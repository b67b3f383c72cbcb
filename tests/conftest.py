"""Fixtures shared by the test files.

- ``_default_gpu_env`` (autouse): every test starts with ``RANDFEAT_GPU``
  unset, so the developer's environment does not change which device
  ``"auto"`` picks; a test that needs it sets it with ``monkeypatch``.
- ``gpu_adapter``: the adapter's description (``randfeat_rs.gpu_info()``);
  the test fails when there is none. ``make test`` installs Mesa's software
  Vulkan driver (lavapipe) where no driver is present, so an absent adapter
  is a failure, not a skip.
- ``set_gpu_chunk_bytes``: ``randfeat_rs.gpu.set_chunk_bytes``, with the
  default restored when the test ends (instead of a try/finally block).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import randfeat_rs as rf
from randfeat_rs import gpu as rgpu

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
def set_gpu_chunk_bytes() -> Iterator[Callable[[int], None]]:
    """``randfeat_rs.gpu.set_chunk_bytes``, with the default restored afterwards."""
    yield rgpu.set_chunk_bytes
    rgpu.set_chunk_bytes(DEFAULT_GPU_CHUNK_BYTES)
