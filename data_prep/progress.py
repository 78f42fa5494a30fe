"""Progress on stderr for long loops, shown only when stderr is a terminal.

``progress_bar(total, desc, enabled)``: a tqdm bar, a no-op when stderr is not a terminal or ``enabled`` is false
(``--no-progress``); progress never goes to stdout. ``total`` may be a callable, called only when a bar is shown
(counting rows means reading a file once more).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

Total = int | None | Callable[[], int | None]


def progress_bar(total: Total, desc: str, enabled: bool = True, stream: TextIO | None = None):
    """A tqdm bar on ``stream`` (default stderr) if ``enabled`` and the stream is a terminal, else a disabled one."""
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    try:
        shown = enabled and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        shown = False
    n = total() if shown and callable(total) else total
    return tqdm(total=n, desc=desc, unit="row", file=stream, mininterval=0.5, leave=False, disable=not shown)
