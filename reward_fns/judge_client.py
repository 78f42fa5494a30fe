"""The one async client for OpenAI-compatible ``/chat/completions`` judges.

Used by the LLM-judge reward (``reward_fns.llm_judge``) and meant to be reused by the offline
evaluator. One ``JudgeClient`` holds a configuration; every call returns a ``JudgeResult`` with the
reply text or a typed ``JudgeError`` -- it never raises for network, HTTP or payload problems.

* **Batch API**: ``await client.batch(list_of_messages)`` (or the blocking ``client.run_batch``)
  keeps at most ``max_concurrency`` requests in flight and returns results in input order.
* **Retries**: timeouts, connection errors, 408/409/425/429/5xx, unreadable 200 replies and
  over-size bodies are retried up to ``max_retries`` times with exponential backoff and jitter;
  ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` are honoured (capped by
  ``retry_after_max``). Other 4xx are final. An optional ``deadline`` bounds one call end to end
  (queueing, attempts and sleeps).
* **Bounded replies**: a body is read in chunks and reading stops at ``max_response_bytes``
  (default 1 MiB; a judge reply is kilobytes). A 200 reply over the cap is the error kind
  ``too_large`` (retried like a transport error); an error status keeps its kind and only the
  first bytes of its body are read. The connection of an over-size reply is closed, not reused.
* **Configuration errors**: HTTP 401/403/404/405 and "model not found" replies mean the key, the
  URL or the model name is wrong, which no retry can fix. They are returned as ``client_error``
  (not retried); ``is_config_error`` recognises them and ``JudgeClient.config_error`` turns one
  into a ``JudgeConfigError`` whose message names the URL, the status and the likely fix. The
  reward raises it; the evaluators may too.
* **Connection pooling**: one ``aiohttp.ClientSession`` per (process, event loop). verl's reward
  workers and Ray actors run their own loops; a session is never used from a loop other than the
  one that created it, sessions of closed loops are dropped, and a forked child starts afresh.
* **Cache**: identical requests (same URL, model, messages and sampling parameters, hashed with
  SHA-256) are answered once: concurrent duplicates share one in-flight request and completed
  replies are kept in a bounded LRU (``cache_size`` entries, optional ``cache_ttl`` seconds).
  Only successful replies are cached; errors are retried by the next caller.
* **Secrets**: the API key is read from the environment variable named by ``api_key_env`` at
  request time. It is not stored on the client, never logged, and never appears in a repr or in
  an error message. Error texts are built by this module and scrubbed: every piece of the key (or
  of an extra header value) at least 8 characters long, in any case, becomes ``***``, and a
  server's reply text that contains such a piece is not echoed at all.
"""

from __future__ import annotations

import asyncio
import atexit
import email.utils
import hashlib
import json
import logging
import os
import random
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

logger = logging.getLogger(__name__)

__all__ = [
    "JudgeClient",
    "JudgeConfigError",
    "JudgeError",
    "JudgeResult",
    "chat_completions_url",
    "is_config_error",
    "scrub_secrets",
    "ERROR_KINDS",
    "CONFIG_STATUS",
    "DEFAULT_MAX_RESPONSE_BYTES",
]

#: Every value ``JudgeError.kind`` can take.
ERROR_KINDS = (
    "timeout",  # per-attempt timeout, or the call's deadline ran out
    "connection",  # refused, reset, server disconnected, truncated body
    "rate_limited",  # HTTP 429 after all retries
    "server_error",  # HTTP 408/409/5xx after all retries
    "client_error",  # other HTTP 4xx (bad request, auth, unknown model): not retried
    "bad_response",  # 200 whose body is not a chat completion (malformed JSON, no choices)
    "too_large",  # 200 whose body is longer than max_response_bytes (reading stopped at the cap)
    "config",  # the client could not build a request (no URL, no model)
    "unexpected",  # anything else (a bug): not retried
)
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Statuses that mean the key, the URL or the model is wrong: final, and a configuration error.
CONFIG_STATUS = frozenset({401, 403, 404, 405})
#: "The model `x` does not exist", "model_not_found", "Unknown model: x", "no such model" ...
_MODEL_MISSING = re.compile(
    r"model_not_found|(?:unknown|invalid|no such) model|model\b.{0,200}?\b(?:not found|does not exist|not exist|"
    r"is not (?:available|served|supported))",
    re.IGNORECASE | re.DOTALL,
)
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
#: Shortest piece of a secret that is scrubbed from error texts (shorter secrets: the whole secret).
SECRET_PIECE = 8
_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class JudgeError:
    """Why a call produced no reply. ``message`` is safe to log (no secrets, bounded length)."""

    kind: str
    message: str
    status: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}{'' if self.status is None else f' (HTTP {self.status})'}: {self.message}"


def is_config_error(error: JudgeError | None) -> bool:
    """True for an error that only a configuration change can fix (wrong key, URL or model)."""
    if error is None:
        return False
    if error.kind == "config":
        return True
    return error.kind == "client_error" and (error.status in CONFIG_STATUS or bool(_MODEL_MISSING.search(error.message)))


class JudgeConfigError(RuntimeError):
    """The judge endpoint rejected the configuration (key, URL or model name): stop the run.

    ``url`` (scrubbed), ``status`` and ``error`` (the ``JudgeError``) are attributes; the message
    names the likely fix.
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None, error: JudgeError | None = None):
        super().__init__(message)
        self.url = url
        self.status = status
        self.error = error


def scrub_secrets(text: str, secrets: Sequence[str]) -> tuple[str, bool]:
    """``text`` with every run of secret pieces replaced by ``***``; and whether anything was found.

    A piece is any substring of a secret at least ``SECRET_PIECE`` (8) characters long (for a
    shorter secret: the whole secret), matched case-insensitively. Linear in ``len(text)``.
    """
    text = str(text)
    spans: list[tuple[int, int]] = []
    low = text.lower()
    for secret in secrets:
        if not isinstance(secret, str) or not secret:
            continue
        w = min(SECRET_PIECE, len(secret))
        sec = secret.lower()
        pieces = {sec[i : i + w] for i in range(len(sec) - w + 1)}
        for i in range(len(low) - w + 1):
            if low[i : i + w] in pieces:
                spans.append((i, i + w))
    if not spans:
        return text, False
    spans.sort()
    out, pos, cur_start, cur_end = [], 0, spans[0][0], spans[0][1]
    for a, b in spans[1:] + [(len(text) + 1, len(text) + 1)]:
        if a <= cur_end:
            cur_end = max(cur_end, b)
            continue
        out.append(text[pos:cur_start])
        out.append("***")
        pos, cur_start, cur_end = cur_end, a, b
    out.append(text[pos:])
    return "".join(out), True


async def _read_upto(content: Any, n: int) -> bytes:
    """Up to ``n`` bytes of a body stream (fewer only when the body ends first)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = await content.read(min(1 << 16, n - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def _read_capped(resp: Any, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of a response body, read in chunks; ``(body, complete)``.

    A declared ``Content-Length`` over the cap is not read beyond a 4 KiB head (for an error
    snippet); otherwise reading stops as soon as the body is known to exceed the cap.
    """
    declared = resp.content_length
    if declared is not None and declared > cap:
        return await _read_upto(resp.content, min(cap, 4096)), False
    raw = await _read_upto(resp.content, cap + 1)
    return (raw, True) if len(raw) <= cap else (raw[:cap], False)


@dataclass(frozen=True)
class JudgeResult:
    """Outcome of one chat completion: ``text`` on success, ``error`` otherwise (never both)."""

    text: str | None
    error: JudgeError | None = None
    attempts: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    cached: bool = False
    usage: dict | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None


def chat_completions_url(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p/v1/chat/completions``; a full endpoint URL is kept as is.

    A bare ``host:port`` (verl's ``reward_router_address``) gets ``http://`` and ``/v1``.
    """
    url = str(base_url).strip().rstrip("/")
    if not url:
        raise ValueError("empty base_url")
    if "://" not in url:
        url = "http://" + url
        if not url.rstrip("/").endswith("/v1"):
            url += "/v1"
    if url.endswith("/chat/completions"):
        return url
    return url + "/chat/completions"


def _parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0 and value == value:
                return value
        except ValueError:
            pass
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if value >= 0 and value == value and value != float("inf") else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class _LRU:
    """Thread-safe bounded LRU of completed replies with an optional time-to-live."""

    def __init__(self, size: int, ttl: float | None):
        self.size = max(0, int(size))
        self.ttl = ttl
        self._data: OrderedDict[str, tuple[float, JudgeResult]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> JudgeResult | None:
        if not self.size:
            return None
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return None
            stamp, value = item
            if self.ttl is not None and time.monotonic() - stamp > self.ttl:
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    def put(self, key: str, value: JudgeResult) -> None:
        if not self.size:
            return
        with self._lock:
            self._data[key] = (time.monotonic(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


#: Every live per-loop state, held here (in a normally imported module) rather than only by its
#: client, so a client collected as part of a reference cycle can still detach its sessions before
#: aiohttp's own finalizers complain; emptied at exit.
_LIVE_STATES: set = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _drop_all_sessions() -> None:
    with _LIVE_LOCK:
        states = list(_LIVE_STATES)
    for state in states:
        state.drop()


class _LoopState:
    """What must not cross event loops: the HTTP session, the concurrency gate, in-flight requests."""

    def __init__(self, max_concurrency: int, connector_limit: int):
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.inflight: dict[str, asyncio.Task] = {}
        self.connector_limit = connector_limit
        self.session: aiohttp.ClientSession | None = None
        with _LIVE_LOCK:
            _LIVE_STATES.add(self)

    def get_session(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            connector = aiohttp.TCPConnector(limit=self.connector_limit, ttl_dns_cache=300)
            # No session-wide timeout: every attempt passes its own.
            self.session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        return self.session

    def drop(self) -> None:
        """Forget the session without awaiting (its loop is closed, or the client is being collected)."""
        with _LIVE_LOCK:
            _LIVE_STATES.discard(self)
        session, self.session = self.session, None
        if session is None or session.closed:
            return
        connector = session.connector
        try:
            session.detach()
        except Exception:  # pragma: no cover - defensive
            pass
        if connector is not None:
            try:
                connector._close()  # synchronous part of close(); the loop that owned it is gone
            except Exception:
                pass


class JudgeClient:
    """Async OpenAI-compatible chat-completions client with retries, a concurrency cap and a cache.

    Args:
        base_url: ``https://api.openai.com/v1``, ``http://127.0.0.1:8000/v1``, a bare ``host:port``
            (verl's ``reward_router_address``) or a full ``.../chat/completions`` URL.
        model: the ``model`` field of every request (for a verl/vLLM reward model: the served path).
        api_key_env: name of the environment variable holding the API key (read per request;
            ``None`` or an unset variable sends no ``Authorization`` header).
        timeout: seconds for one attempt (connect + send + full reply).
        max_retries: retries after the first attempt (so at most ``max_retries + 1`` attempts).
        backoff_base, backoff_max: retry ``k`` (0-based) sleeps ``min(backoff_max, backoff_base * 2**k)``
            scaled by a random factor in [0.5, 1.0] (jitter).
        retry_after_max: cap on a server's ``Retry-After``; when given, the wait is
            ``Retry-After * U(1.0, 1.2)`` instead of the backoff.
        deadline: optional bound in seconds on one ``complete`` call (queueing, attempts, sleeps).
        max_concurrency: requests in flight at once, per event loop.
        temperature, max_tokens: sampling parameters of every request (defaults 0 and 512).
        extra_body: more JSON fields merged into every request (e.g. ``{"seed": 0}``,
            ``{"max_completion_tokens": 512}``); they override the defaults above.
        cache_size, cache_ttl: completed-reply LRU size (0 disables caching and de-duplication)
            and optional entry lifetime in seconds.
        headers: extra HTTP headers (never logged; their values are scrubbed like the key).
        max_response_bytes: largest response body read (default 1 MiB); a longer 200 reply is a
            ``too_large`` error, retried like a transport error.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 16.0,
        retry_after_max: float = 60.0,
        deadline: float | None = None,
        max_concurrency: int = 64,
        temperature: float = 0.0,
        max_tokens: int = 512,
        extra_body: dict | None = None,
        cache_size: int = 4096,
        cache_ttl: float | None = None,
        headers: dict | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ):
        if not model:
            raise ValueError("JudgeClient needs a model name")
        if timeout is None or float(timeout) <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        if int(max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        if int(max_concurrency) < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency!r}")
        if isinstance(max_response_bytes, bool) or int(max_response_bytes) < 1:
            raise ValueError(f"max_response_bytes must be >= 1, got {max_response_bytes!r}")
        self.url = chat_completions_url(base_url)
        self.model = str(model)
        self.api_key_env = api_key_env or None
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.retry_after_max = float(retry_after_max)
        self.deadline = None if deadline is None else float(deadline)
        self.max_concurrency = int(max_concurrency)
        self.max_response_bytes = int(max_response_bytes)
        self.params: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens)}
        if extra_body:
            self.params.update(dict(extra_body))
        self._headers = dict(headers or {})
        self._cache = _LRU(cache_size, cache_ttl)
        self._dedupe = bool(cache_size)
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.stats = {"calls": 0, "requests": 0, "retries": 0, "cache_hits": 0, "errors": 0}

    def __repr__(self) -> str:  # never shows the key or headers
        return (
            f"JudgeClient(url={self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, "
            f"timeout={self.timeout}, max_retries={self.max_retries}, max_concurrency={self.max_concurrency})"
        )

    # ------------------------------------------------------------------ per-loop state
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            if os.getpid() != self._pid:  # forked: the parent's sockets and loops are not ours
                self._loops = weakref.WeakKeyDictionary()
                self._lock = threading.Lock()
                self._pid = os.getpid()
            state = self._loops.get(loop)
            if state is None:
                for other, other_state in list(self._loops.items()):
                    if other.is_closed():
                        other_state.drop()
                        del self._loops[other]
                state = _LoopState(self.max_concurrency, self.max_concurrency)
                self._loops[loop] = state
            return state

    def __del__(self) -> None:
        # Sessions cannot be awaited closed from here; detach them so no "Unclosed client session"
        # noise is logged when a client (and the loops it served) is garbage collected.
        try:
            for state in list(self._loops.values()):
                state.drop()
        except Exception:
            pass

    async def aclose(self) -> None:
        """Close the session of the running loop (others close when their loop is gone)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.pop(loop, None)
        if state is not None:
            with _LIVE_LOCK:
                _LIVE_STATES.discard(state)
            if state.session is not None and not state.session.closed:
                await state.session.close()

    def cache_clear(self) -> None:
        self._cache.clear()

    # ------------------------------------------------------------------ requests
    def request_body(self, messages: Sequence[dict], **params: Any) -> dict:
        """The exact JSON body sent for ``messages`` (also the cache key's content)."""
        body = {"model": self.model, "messages": [dict(m) for m in messages]}
        body.update(self.params)
        body.update(params)
        return body

    def cache_key(self, body: dict) -> str:
        blob = json.dumps([self.url, body], sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    async def complete(self, messages: Sequence[dict], **params: Any) -> JudgeResult:
        """One chat completion with retries; ``params`` override sampling fields for this call."""
        self.stats["calls"] += 1
        body = self.request_body(messages, **params)
        if not self._dedupe:
            return await self._call(body)
        key = self.cache_key(body)
        hit = self._cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return _replace(hit, cached=True, attempts=0, latency_s=0.0)
        state = self._state()
        task = state.inflight.get(key)
        if task is not None:
            self.stats["cache_hits"] += 1
            result = await asyncio.shield(task)
            return _replace(result, cached=True, attempts=0)
        task = asyncio.get_running_loop().create_task(self._call(body))
        state.inflight[key] = task

        def _done(t: asyncio.Task, key: str = key, state: _LoopState = state) -> None:
            if state.inflight.get(key) is t:
                del state.inflight[key]
            if not t.cancelled() and t.exception() is None and t.result().ok:
                self._cache.put(key, t.result())

        task.add_done_callback(_done)
        return await asyncio.shield(task)

    async def batch(
        self,
        batch_messages: Sequence[Sequence[dict]],
        *,
        on_result: Callable[[int, JudgeResult], None] | None = None,
        **params: Any,
    ) -> list[JudgeResult]:
        """Complete every conversation (at most ``max_concurrency`` in flight); results in input order."""

        async def one(i: int, msgs: Sequence[dict]) -> JudgeResult:
            res = await self.complete(msgs, **params)
            if on_result is not None:
                on_result(i, res)
            return res

        return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(batch_messages))))

    def run_batch(self, batch_messages: Sequence[Sequence[dict]], **kwargs: Any) -> list[JudgeResult]:
        """Blocking ``batch`` for scripts (runs its own event loop; not for use inside a running loop)."""

        async def main() -> list[JudgeResult]:
            try:
                return await self.batch(batch_messages, **kwargs)
            finally:
                await self.aclose()

        return asyncio.run(main())

    # ------------------------------------------------------------------ internals
    def _auth_headers(self) -> tuple[dict, str | None]:
        headers = {"Content-Type": "application/json", **self._headers}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    def _secrets(self, key: str | None) -> list[str]:
        found = [key] if key else []
        return found + [v for v in self._headers.values() if isinstance(v, str) and len(v) >= SECRET_PIECE]

    def _scrub(self, text: str, key: str | None) -> str:
        """Our own message text, with every piece of a secret replaced (then cut to 300 chars)."""
        return scrub_secrets(str(text)[: 4 * _MESSAGE_CHARS], self._secrets(key))[0][:_MESSAGE_CHARS]

    def _echo(self, text: str, key: str | None) -> str:
        """Text a server sent: quoted (cut to 300 chars) only when it holds no piece of a secret."""
        head = str(text)[: 4 * _MESSAGE_CHARS]
        if scrub_secrets(head, self._secrets(key))[1]:
            return "(reply text withheld: it contains part of a secret)"
        return head[:_MESSAGE_CHARS]

    def config_error(self, error: JudgeError | None) -> JudgeConfigError | None:
        """A ``JudgeConfigError`` naming the URL, the status and the likely fix, if ``error`` is one."""
        if not is_config_error(error):
            return None
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        url = self._scrub(self.url, key)
        status = error.status
        model_missing = bool(_MODEL_MISSING.search(error.message))
        if self.api_key_env:
            where = "set" if key else "NOT set in this process"
            key_hint = f"the environment variable {self.api_key_env!r} (api_key_env, {where})"
        else:
            key_hint = "api_key_env (None: no key is sent; verl's reward router never gets one)"
        if model_missing:
            fix = (f"the model {self.model!r} is not served at this URL, or rejects a request field (the server's "
                   "message says which): check `model` (for a judge served by verl's reward loop, the served name "
                   "is the reward model's local path) and extra_body")
        elif status == 401:
            fix = f"the API key was rejected or is missing: check {key_hint}, and that it is exported to the reward workers"
        elif status == 403:
            fix = f"the key may not use this model or endpoint: check {key_hint}, `model` ({self.model!r}) and base_url"
        elif status in (404, 405):
            fix = ("no chat-completions endpoint at this URL: check base_url (an API base such as "
                   "https://api.openai.com/v1 or http://host:port/v1, or the full .../chat/completions URL)")
        else:
            fix = "check base_url, `model` and the API key variable"
        said = f" Server said: {error.message}" if error.message else ""
        return JudgeConfigError(
            f"judge configuration error: POST {url} answered HTTP {status}. Likely fix: {fix}.{said}",
            url=url, status=status, error=error,
        )

    def _backoff(self, retry_index: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.retry_after_max, retry_after) * random.uniform(1.0, 1.2)
        return min(self.backoff_max, self.backoff_base * (2**retry_index)) * random.uniform(0.5, 1.0)

    async def _call(self, body: dict) -> JudgeResult:
        state = self._state()
        start = time.monotonic()
        end = None if self.deadline is None else start + self.deadline
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempts = 0
        error: JudgeError | None = None
        headers, key = self._auth_headers()
        for attempt in range(self.max_retries + 1):
            retry_after = None
            budget = self.timeout if end is None else min(self.timeout, end - time.monotonic())
            if budget <= 0:
                break
            attempts += 1
            self.stats["requests"] += 1
            try:
                async with state.semaphore:
                    if end is not None:  # time spent queueing counts against the deadline
                        budget = min(self.timeout, end - time.monotonic())
                        if budget <= 0:
                            raise asyncio.TimeoutError()
                    timeout = aiohttp.ClientTimeout(total=budget)
                    async with state.get_session().post(self.url, data=payload, headers=headers, timeout=timeout) as resp:
                        status = resp.status
                        retry_after = _parse_retry_after(resp.headers)
                        raw, complete = await _read_capped(resp, self.max_response_bytes)
                        if not complete:  # do not reuse a connection with unread bytes on it
                            resp.close()
                if status == 200 and not complete:
                    error = JudgeError(
                        "too_large", f"reply body over max_response_bytes={self.max_response_bytes} (reading stopped)", status
                    )
                elif status == 200:
                    text, finish, usage, err = _parse_completion(raw)
                    if err is None:
                        return JudgeResult(
                            text, None, attempts, time.monotonic() - start, finish, usage=usage
                        )
                    error = JudgeError("bad_response", self._echo(err, key), status)
                else:
                    snippet = self._echo(raw[: 4 * _MESSAGE_CHARS].decode("utf-8", "replace"), key)
                    if not complete:
                        snippet = f"{snippet} (body over max_response_bytes={self.max_response_bytes}, not read)".strip()
                    if status == 429:
                        error = JudgeError("rate_limited", snippet or "too many requests", status)
                    elif status in _RETRYABLE_STATUS or status >= 500:
                        error = JudgeError("server_error", snippet or "server error", status)
                    else:
                        error = JudgeError("client_error", snippet or "client error", status)
                        break
            except asyncio.TimeoutError:
                error = JudgeError("timeout", f"no complete reply within {budget:.3g}s")
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError) as e:
                error = JudgeError("connection", self._scrub(f"{type(e).__name__}: {e}", key))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug or an exotic failure: report it, don't retry it
                error = JudgeError("unexpected", self._scrub(f"{type(e).__name__}: {e}", key))
                break
            if attempt == self.max_retries:
                break
            delay = self._backoff(attempt, retry_after)
            if end is not None:
                remaining = end - time.monotonic()
                if remaining <= 0.01:
                    break
                delay = min(delay, remaining)
            self.stats["retries"] += 1
            await asyncio.sleep(delay)
        if error is None:
            error = JudgeError("timeout", f"deadline of {self.deadline}s spent before an attempt")
        elif end is not None and time.monotonic() >= end and error.kind != "client_error":
            error = JudgeError(error.kind, error.message + f" (deadline {self.deadline}s reached)", error.status)
        self.stats["errors"] += 1
        return JudgeResult(None, error, attempts, time.monotonic() - start)


def _parse_completion(raw: bytes) -> tuple[str | None, str | None, dict | None, str | None]:
    """(text, finish_reason, usage, error) from a chat-completion body."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        return None, None, None, f"malformed JSON ({type(e).__name__}, {len(raw)} bytes)"
    if not isinstance(data, dict):
        return None, None, None, "reply is not a JSON object"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        msg = "reply has no choices"
        if isinstance(data.get("error"), dict):
            msg += f": {data['error'].get('message', '')}"
        return None, None, None, msg
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        return None, None, None, "choice has no message"
    content = message.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        return None, None, None, f"message content is {type(content).__name__}, not text"
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    finish = choice.get("finish_reason")
    return content, finish if isinstance(finish, str) else None, usage, None


def _replace(result: JudgeResult, **changes: Any) -> JudgeResult:
    from dataclasses import replace

    return replace(result, **changes)
