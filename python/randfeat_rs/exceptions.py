"""Exception tree of randfeat_rs.

Every error raised by the compiled core is an instance of
:class:`RandfeatError`. The subclasses also derive from the built-in
exception users already catch: bad input is a :class:`ValueError`, a wrong
dtype a :class:`TypeError`.
"""

from __future__ import annotations

__all__ = [
    "GpuError",
    "InvalidDtypeError",
    "InvalidInputError",
    "NotPositiveDefiniteError",
    "RandfeatError",
    "RustPanicError",
]


class RandfeatError(Exception):
    """Base class of every randfeat_rs error."""


class InvalidInputError(RandfeatError, ValueError):
    """An argument has the wrong shape, range or value (NaN, unknown option...)."""


class InvalidDtypeError(RandfeatError, TypeError):
    """An argument has a type or dtype the function does not accept (complex
    or other non-real data, a scipy.sparse matrix where a dense array is
    needed, a string where a number is needed)."""


class NotPositiveDefiniteError(RandfeatError, ValueError):
    """A Cholesky factorization failed even after adding jitter."""


class GpuError(RandfeatError, RuntimeError):
    """The GPU was requested but no adapter is usable, or a GPU call failed."""


class RustPanicError(RandfeatError, RuntimeError):
    """A bug: the Rust core panicked. The process survives; please report it."""
