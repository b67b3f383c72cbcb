"""Progress of long calls, written to ``sys.stderr`` by Python.

The compiled core reports the progress of its long routines (the current
stage, a count of units done out of a total, and messages such as a finished
optimizer run's summary) to a Python callback about ten times a second while
it runs, and once more when it is done. With ``verbose=True`` the estimators
pass a :class:`ProgressPrinter` as that callback. It writes through
``sys.stderr`` (not the process's file descriptor 2), so the output shows in
Jupyter notebooks and wherever ``sys.stderr`` is redirected.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Optional, TextIO

__all__ = ["ProgressPrinter", "progress_printer"]

# Characters of the bar drawn on a terminal.
_BAR_WIDTH = 24

# Plain output of a stage without a known total: at most one line per this
# many seconds.
_PLAIN_INTERVAL = 2.0


class _Discard:
    """A stream that drops what is written: where ``sys.stderr`` is None
    (``pythonw``, some embedding hosts), progress has nowhere to go."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class ProgressPrinter:
    """Prints the progress of one long call to ``sys.stderr``.

    Called as ``printer(stage, done, total, messages)``: every message is
    printed on its own line, and the stage (a plural noun naming its units,
    e.g. ``"centroid GPs"``) as ``"{prefix}: {done}/{total} {stage}"``. On a
    terminal the stage is one bar redrawn in place (carriage return); on
    other streams it is a plain line when a stage is first seen, when
    ``done`` crosses another tenth of ``total``, and when the stage
    completes (every few seconds when ``total`` is 0, i.e. unknown).

    Parameters
    ----------
    prefix : str
        Put in front of every line (the estimator's name).
    delay : float, default=0.0
        Seconds after the printer's creation before any stage is shown
        (messages are always printed): a call that ends sooner shows no
        stage at all.
    stream : file-like or None, default=None
        Where to write; ``None`` means ``sys.stderr`` at the time of each
        write (nowhere when that is None).
    """

    def __init__(self, prefix: str, *, delay: float = 0.0, stream: Optional[TextIO] = None) -> None:
        self.prefix = prefix
        self.delay = float(delay)
        self._stream = stream
        self._start = time.monotonic()
        self._stage: Optional[str] = None
        self._shown = (-1, -1)  # (done, tenth) last written for the stage
        self._last_line = 0.0
        self._bar = ""  # the bar on the terminal's current line

    @property
    def stream(self) -> TextIO:
        """The stream written to (one that drops the output when
        ``sys.stderr`` is None)."""
        stream = sys.stderr if self._stream is None else self._stream
        return stream if stream is not None else _Discard()  # type: ignore[return-value]

    def _is_terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty()) if isatty is not None else False
        except ValueError:  # a closed stream
            return False

    def __call__(self, stage: str, done: int, total: int, messages: Sequence[str]) -> None:
        """Print ``messages``, then show ``done`` of ``total`` units of ``stage``.

        Parameters
        ----------
        stage : str
            The current stage (empty before the first).
        done : int
            Units of the stage done.
        total : int
            Units of the stage in all (0 when not known).
        messages : sequence of str
            Messages queued since the last call.
        """
        for text in messages:
            self.message(text)
        if stage and time.monotonic() - self._start >= self.delay:
            self._show(stage, int(done), int(total))
        self.stream.flush()

    def message(self, text: str) -> None:
        """Print ``"{prefix}: {text}"`` on its own line.

        Parameters
        ----------
        text : str
            The message.
        """
        bar = self._bar
        self._clear()
        self.stream.write(f"{self.prefix}: {text}\n")
        if bar:
            self._draw(bar)
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line on a terminal (the bar stays visible)."""
        if self._bar:
            self.stream.write("\n")
            self._bar = ""
        self.stream.flush()

    def _show(self, stage: str, done: int, total: int) -> None:
        count = f"{done}/{total}" if total > 0 else f"{done}"
        line = f"{self.prefix}: {count} {stage}"
        new_stage = stage != self._stage or done < self._shown[0]
        if new_stage:
            self._stage = stage
            self._shown = (-1, -1)
        if self._is_terminal():
            if new_stage:
                self.close()
            if total > 0:
                filled = _BAR_WIDTH * min(done, total) // total
                bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
                line = f"{self.prefix}: [{bar}] {count} {stage}"
            self._draw(line)
            return
        now = time.monotonic()
        tenth = 10 * done // total if total > 0 else -1
        if done == self._shown[0]:
            return
        due = (
            new_stage
            or (total > 0 and (tenth > self._shown[1] or done >= total))
            or (total <= 0 and now - self._last_line >= _PLAIN_INTERVAL)
        )
        if due:
            self.stream.write(line + "\n")
            self._shown = (done, tenth)
            self._last_line = now

    def _draw(self, line: str) -> None:
        pad = " " * max(0, len(self._bar) - len(line))
        self.stream.write("\r" + line + pad)
        self._bar = line

    def _clear(self) -> None:
        if self._bar:
            self.stream.write("\r" + " " * len(self._bar) + "\r")
            self._bar = ""


@contextmanager
def progress_printer(
    prefix: str, verbose: bool, *, delay: float = 0.0
) -> Iterator[Optional[ProgressPrinter]]:
    """A :class:`ProgressPrinter` for one call when ``verbose``, else ``None``.

    Parameters
    ----------
    prefix : str
        Put in front of every line.
    verbose : bool
        Whether to print anything.
    delay : float, default=0.0
        See :class:`ProgressPrinter`.

    Yields
    ------
    ProgressPrinter or None
        The callback to pass to the core (``None``: no progress reports).
        Its bar line is ended when the block exits, also on an exception.
    """
    if not verbose:
        yield None
        return
    printer = ProgressPrinter(prefix, delay=delay)
    try:
        yield printer
    finally:
        printer.close()
