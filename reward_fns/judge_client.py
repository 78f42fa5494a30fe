"""The async client of OpenAI-compatible ``/chat/completions`` judges, on the ``openai`` SDK. Every judge request of
``reward_fns.llm_judge`` and of the evaluators (``scripts.eval.endpoint.make_client``) goes through ``JudgeClient``;
from a script: ``asyncio.run(JudgeClient(base_url, model).complete(messages))``. A call returns a ``JudgeResult``: the
reply text or a typed ``JudgeError`` (``reward_fns.judge_errors``); it never raises for network, HTTP or payload
problems.

* Retries, backoff and timeouts are the SDK's; ``deadline`` bounds a whole call.
* ``max_concurrency``: SDK calls in progress per event loop (a FIFO semaphore; the transport holds as many
  connections). verl's ``rate_limited`` manager has its own (``reward.max_concurrent``, default 1): set it >=
  ``max_concurrency``.
* One SDK client per (process, event loop), closed with its loop (``_closed_with_loop``); a forked child makes its own.
* Identical requests (URL and body, SHA-256) are sent once; successful replies are kept in an LRU (``ReplyCache``).
* The key goes to the SDK only; error texts are scrubbed of it, and httpx's request log lines show URLs masked
  (``reward_fns.redact.mask_url``).
* ``Transport`` reads reply bodies up to ``max_response_bytes`` and refuses a 2xx reply that is not a chat completion
  (``ReplyRefused``: the SDK retries it like a dropped connection).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl

import httpx
import openai

from reward_fns import judge_errors
from reward_fns.judge_errors import JudgeConfigError, JudgeError, ReplyRefused
from reward_fns.redact import mask_url

DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
#: HTTP attempts of the running call, counted by the transport (the SDK retries inside one call).
ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("judge_attempts", default=None)
#: The SDK's api_key when there is none; the transport drops its header (no key may reach verl's router).
NO_KEY = "verl-judge-no-key"
_SHARD = 8  # connections per httpcore pool (see Transport)


def _completion_problem(raw: bytes) -> str | None:
    """Why a 2xx body is not a chat completion the caller can read (None: it is one)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested past Python's limit
        return f"malformed JSON ({type(e).__name__}, {len(raw)} bytes)"
    if not isinstance(data, dict):
        return "reply is not a JSON object"
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        return "reply has no choices" + (f": {error.get('message', '')}" if isinstance(error, dict) else "")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return "choice has no message"
    content = message.get("content")
    if content is None or isinstance(content, str):
        return None
    return f"message content is {type(content).__name__}, not text"


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process (building one reads the CA bundle: about 50 ms)."""
    return httpx.create_ssl_context()


class Transport(httpx.AsyncBaseTransport):
    """One loop's HTTP transport: ``max_concurrency`` connections, bodies read up to a cap, attempts
    counted. The connections are split into pools of at most ``_SHARD``: httpcore's pool bookkeeping
    grows with the square of its size (about 18 ms of CPU per request at 64 connections in one pool,
    4 ms in pools of 8). The client's semaphore around each call keeps a connection free."""

    def __init__(self, max_concurrency: int, cap: int):
        full, rest = divmod(max_concurrency, _SHARD)
        self._room = [_SHARD] * full + [rest] * bool(rest)
        self._pools = [
            httpx.AsyncHTTPTransport(verify=_tls(), limits=httpx.Limits(max_connections=n)) for n in self._room
        ]
        self._cap = cap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"  # the cap counts body bytes, not compressed ones
        if request.headers.get("Authorization") == f"Bearer {NO_KEY}":
            del request.headers["Authorization"]
        if (counter := ATTEMPTS.get()) is not None:
            counter[0] += 1
        i = next(i for i, room in enumerate(self._room) if room)  # the first pool with a free connection
        self._room[i] -= 1
        try:
            response = await self._pools[i].handle_async_request(request)
            ok, body = 200 <= response.status_code < 300, bytearray()
            over = ok and int(response.headers.get("content-length") or 0) > self._cap
            try:
                if not over:
                    async for chunk in response.stream:
                        body += chunk
                        if over := len(body) > self._cap:
                            break
            finally:
                await response.aclose()  # a body left unread closes its connection instead of reusing it
        finally:
            self._room[i] += 1
        if ok:
            problem = f"reply body over max_response_bytes={self._cap} (reading stopped)" if over else None
            if problem or (problem := _completion_problem(bytes(body))):
                raise ReplyRefused("too_large" if over else "bad_response", problem)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=bytes(body[: self._cap]),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await asyncio.gather(*(pool.aclose() for pool in self._pools))


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


def _masked_urls(record: logging.LogRecord) -> bool:
    """A log filter: rewrites the record's message with every URL in it masked (``mask_url``)."""
    record.msg, record.args = mask_url(record.getMessage()), None
    return True


logging.getLogger("httpx").addFilter(_masked_urls)  # httpx logs each request's full URL at INFO


@dataclass(frozen=True)
class JudgeResult:
    """Outcome of one chat completion: ``text`` on success, ``error`` otherwise (never both)."""

    text: str | None
    error: JudgeError | None = None
    attempts: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def chat_completions_url(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p/v1/chat/completions``; a full endpoint URL is kept as is; a bare
    ``host:port`` (verl's ``reward_router_address``) gets ``http://`` and ``/v1``; a query string stays last."""
    url, sep, query = str(base_url).strip().partition("?")
    url = url.rstrip("/")
    if not url:
        raise ValueError("empty base_url")
    if "://" not in url:
        url = "http://" + url + ("" if url.endswith("/v1") else "/v1")
    if not url.endswith("/chat/completions"):
        url += "/chat/completions"
    return url + sep + query


async def _closed_with_loop(sdk: openai.AsyncOpenAI):
    """Parked at its ``yield`` while its loop runs; the loop's ``shutdown_asyncgens()`` closes the client."""
    try:
        yield
    finally:
        await sdk.close()


class _LoopState:
    """What must not cross event loops: the SDK client (its connections), the calls' semaphore (the one
    concurrency limit) and the in-flight requests."""

    __slots__ = ("sdk", "slots", "closer", "inflight")

    def __init__(self, sdk: openai.AsyncOpenAI, slots: int):
        self.sdk, self.slots = sdk, asyncio.Semaphore(slots)
        self.closer, self.inflight = _closed_with_loop(sdk), {}


class JudgeClient:
    """``base_url``: an API base, a bare ``host:port`` or a full URL (``chat_completions_url``). ``api_key_env``: the
    *name* of the key's variable (``None`` or unset: no ``Authorization`` header). ``timeout`` is per attempt;
    ``deadline`` bounds one ``complete`` call (slot wait, attempts, retry sleeps). ``cache_size`` 0 disables the cache
    and de-duplication."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        deadline: float | None = None,
        max_concurrency: int = 64,
        temperature: float = 0.0,
        max_tokens: int = 512,
        extra_body: dict | None = None,
        cache_size: int = 4096,
        cache_ttl: float | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ):
        if not model:
            raise ValueError("JudgeClient needs a model name")
        if timeout is None or float(timeout) <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        for name, value, least in (
            ("max_retries", max_retries, 0),
            ("max_concurrency", max_concurrency, 1),
            ("max_response_bytes", max_response_bytes, 1),
        ):
            if isinstance(value, bool) or int(value) < least:
                raise ValueError(f"{name} must be >= {least}, got {value!r}")
        self.url, self.model, self.api_key_env = chat_completions_url(base_url), str(model), api_key_env or None
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.deadline = None if deadline is None else float(deadline)
        self.max_concurrency, self.max_response_bytes = int(max_concurrency), int(max_response_bytes)
        self.params = {"temperature": float(temperature), "max_tokens": int(max_tokens), **(extra_body or {})}
        self._cache, self._dedupe = ReplyCache(cache_size, cache_ttl), bool(cache_size)
        self._loops: dict[tuple[int, asyncio.AbstractEventLoop], _LoopState] = {}
        self._lock = threading.Lock()
        self.stats = {"calls": 0, "requests": 0, "retries": 0, "cache_hits": 0, "errors": 0}

    def __repr__(self) -> str:  # never shows the key
        return (
            f"JudgeClient(url={mask_url(self.url)!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, timeout="
            f"{self.timeout}, max_retries={self.max_retries}, max_concurrency={self.max_concurrency})"
        )

    # ------------------------------------------------------------------ per-loop SDK clients
    def key(self) -> str | None:
        """The API key, read from ``api_key_env`` now (None: no key)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _new_state(self) -> _LoopState:
        base, _, query = self.url.partition("?")
        http = httpx.AsyncClient(transport=Transport(self.max_concurrency, self.max_response_bytes))
        sdk = openai.AsyncOpenAI(
            api_key=self.key() or NO_KEY,
            base_url=base.removesuffix("/chat/completions"),
            default_query=dict(parse_qsl(query)) or None,
            max_retries=self.max_retries,
            http_client=http,
            timeout=self.timeout,
        )
        return _LoopState(sdk, self.max_concurrency)

    async def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        key = (os.getpid(), loop)
        with self._lock:
            state = self._loops.get(key)
            if state is not None and not state.sdk.is_closed():
                return state
            for old in [k for k in self._loops if k[0] == key[0] and k[1].is_closed()]:
                del self._loops[old]  # closed by its loop's shutdown (or left to the garbage collector)
            state = self._loops[key] = self._new_state()
        await anext(state.closer)  # registers it with this loop's async-generator shutdown
        return state

    async def aclose(self) -> None:
        """Close the running loop's client now (others close with their loops)."""
        with self._lock:
            state = self._loops.pop((os.getpid(), asyncio.get_running_loop()), None)
        if state is not None:
            await state.closer.aclose()

    # ------------------------------------------------------------------ requests
    async def complete(self, messages: Sequence[dict]) -> JudgeResult:
        """One chat completion (the SDK retries inside); the URL and the JSON body (SHA-256) are the cache's key."""
        self.stats["calls"] += 1
        body = {"model": self.model, "messages": [dict(m) for m in messages], **self.params}
        if not self._dedupe:
            return await self._call(body)
        blob = json.dumps([self.url, body], sort_keys=True, ensure_ascii=False, default=str)
        key = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        hit = self._cache.get(key)
        if hit is not None:
            self.stats["cache_hits"] += 1
            return replace(hit, cached=True, attempts=0, latency_s=0.0)
        state = await self._state()
        task = state.inflight.get(key)
        if task is not None:
            self.stats["cache_hits"] += 1
            return replace(await asyncio.shield(task), cached=True, attempts=0)
        task = state.inflight[key] = asyncio.get_running_loop().create_task(self._call(body))

        def done(t: asyncio.Task) -> None:
            if state.inflight.get(key) is t:
                del state.inflight[key]
            if not t.cancelled() and t.exception() is None and t.result().ok:
                self._cache.put(key, t.result())

        task.add_done_callback(done)
        return await asyncio.shield(task)

    async def _call(self, body: dict) -> JudgeResult:
        state = await self._state()
        start, counter = time.monotonic(), [0]
        token = ATTEMPTS.set(counter)
        fields = {k: v for k, v in body.items() if k not in ("model", "messages")}

        async def send() -> Any:
            async with state.slots:  # first come, first served
                return await state.sdk.chat.completions.create(
                    model=body["model"], messages=body["messages"], extra_body=fields
                )

        try:
            reply, error = await asyncio.wait_for(send(), self.deadline), None
        except asyncio.TimeoutError:
            error = JudgeError("timeout", f"deadline of {self.deadline}s reached")
        except Exception as e:  # noqa: BLE001 - every failure becomes a typed error
            error = judge_errors.error_from(e, self)
        finally:
            ATTEMPTS.reset(token)
        attempts = counter[0]
        self.stats["requests"] += attempts
        self.stats["retries"] += max(0, attempts - 1)
        if error is not None:
            self.stats["errors"] += 1
            return JudgeResult(None, error, attempts, time.monotonic() - start)
        choice = reply.choices[0]
        return JudgeResult(choice.message.content or "", None, attempts, time.monotonic() - start, choice.finish_reason)

    # ------------------------------------------------------------------ errors
    def secrets(self) -> list[str]:
        """What no error text may show: the API key."""
        return [key] if (key := self.key()) else []

    def config_error(self, error: JudgeError | None) -> JudgeConfigError | None:
        """A ``JudgeConfigError`` naming the URL, the status and the likely fix, if ``error`` is one."""
        return judge_errors.config_error(error, self)
