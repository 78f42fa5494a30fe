"""The judge client's reply cache: a thread-safe bounded LRU of successful replies, by request key, with an optional
time-to-live. No command of its own; used by ``reward_fns.judge_client`` (``cache_size``, ``cache_ttl``).
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ReplyCache:
    """Thread-safe bounded LRU of completed replies with an optional time-to-live (``ttl`` seconds)."""

    def __init__(self, size: int, ttl: float | None):
        self.size, self.ttl, self._lock = max(0, int(size)), ttl, threading.Lock()
        self._data: dict[str, tuple[float, Any]] = {}  # oldest first

    def get(self, key: str) -> Any | None:
        with self._lock:
            stamp, value = self._data.pop(key, (0.0, None))
            if value is None or (self.ttl is not None and time.monotonic() - stamp > self.ttl):
                return None
            self._data[key] = (stamp, value)  # now the most recently used
            return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._data.pop(key, None)
            self._data[key] = (time.monotonic(), value)
            while len(self._data) > self.size:
                del self._data[next(iter(self._data))]
