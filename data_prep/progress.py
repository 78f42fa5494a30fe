"""Progress on stderr for long loops, shown only when stderr is a terminal.

``progress_bar(total, desc, enabled)``: a tqdm bar when tqdm is installed, else a ``desc: N/TOTAL rows`` counter;
a no-op when stderr is not a terminal or ``enabled`` is false (``--no-progress``). ``total`` may be a callable, called
only when a bar is shown (counting rows means reading a file once more).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

Total = int | None | Callable[[], int | None]


class _Off:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class _Counter:
    """``desc: N/TOTAL rows``, redrawn in place at most every ``interval`` seconds; erased on close."""

    def __init__(self, total: int | None, desc: str, stream: TextIO, interval: float = 0.5):
        self.total, self.desc, self.stream, self.interval = total, desc, stream, interval
        self.n = 0
        self._last = float("-inf")
        self._width = 0

    def _line(self) -> str:
        return f"{self.desc}: {self.n}" + (f"/{self.total}" if self.total is not None else "") + " rows"

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            line = self._line()
            self.stream.write("\r" + line.ljust(self._width))
            self.stream.flush()
            self._width = max(self._width, len(line))

    def close(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_bar(total: Total, desc: str, enabled: bool = True, stream: TextIO | None = None):
    """A progress bar on ``stream`` (default stderr) if ``enabled`` and the stream is a terminal, else a no-op."""
    stream = sys.stderr if stream is None else stream
    if not enabled or not _isatty(stream):
        return _Off()
    n = total() if callable(total) else total
    try:
        from tqdm import tqdm
    except ImportError:
        return _Counter(n, desc, stream)
    return tqdm(total=n, desc=desc, unit="row", file=stream, mininterval=0.5, leave=False)
