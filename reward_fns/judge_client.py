"""The async client of OpenAI-compatible ``/chat/completions`` judges, built on the ``openai`` SDK.

Every judge request of the LLM-judge reward (``reward_fns.llm_judge.compute_score``, run by verl's
reward loop) and of the evaluators (``python -m scripts.eval.judge`` / ``scripts.eval.gsm8k``, via
``scripts.eval.common.make_client``) goes through ``JudgeClient``; from a script:
``JudgeClient(base_url, model).run_batch(list_of_messages)``. A call returns a ``JudgeResult``: the
reply text or a typed ``JudgeError``; it never raises for network, HTTP or payload problems.

* Retries, backoff with jitter, ``Retry-After`` and timeouts are the SDK's (``AsyncOpenAI(max_retries=,
  timeout=)``); ``deadline`` bounds a whole call. ``outcome(error)`` (table ``OUTCOMES``) says what a
  caller does: ``"fallback"`` (``APITimeoutError``, ``APIConnectionError``, ``RateLimitError``,
  ``InternalServerError`` after the retries; a 2xx reply refused below), ``"stop"``
  (``AuthenticationError``, ``PermissionDeniedError``, ``NotFoundError``, 405, "model not found":
  ``config_error`` names the fix) or ``"refused"`` (any other 4xx: this request was rejected).
* The SDK's ``http_client`` is an ``httpx.AsyncClient`` whose transport reads at most
  ``max_response_bytes`` of a body (uncompressed), refuses a longer 2xx reply or one that is not a
  chat completion (the SDK retries it like a dropped connection), cuts error bodies at the cap and
  counts attempts.
* One concurrency limit, ``max_concurrency``: SDK calls in progress per event loop (a FIFO
  semaphore around each call, its retries included; the transport holds as many connections). It
  is the one every caller has (reward and evaluators), counts requests after de-duplication and
  keeps them in submission order. verl's ``rate_limited`` manager has the same kind of semaphore
  (``reward.max_concurrent``, default 1): with that manager, set it >= ``max_concurrency``.
* One SDK client per (process, event loop), made on first use: verl's reward workers are Ray actors
  with one long-lived loop, scripts use ``asyncio.run``. It is closed with its loop: an async
  generator parked at its ``yield`` is finalised by the loop's ``shutdown_asyncgens()`` (which
  ``asyncio.run`` calls) and awaits ``close()``; ``aclose()`` closes the running loop's one now. A
  forked child makes its own.
* Identical requests (URL and body, SHA-256) are sent once; successful replies are kept in an LRU.
* The API key (the variable named by ``api_key_env``, read when a loop's client is made) goes to the
  SDK only. Error texts are scrubbed: any piece of 8+ characters of the key or of an extra header
  value, in any case, becomes ``***``, and a server's text that holds such a piece is withheld.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Any
from urllib.parse import parse_qsl

import httpx
import openai

from reward_fns.redact import mask_url

__all__ = ["JudgeClient", "JudgeConfigError", "JudgeError", "JudgeResult", "ReplyRefused", "chat_completions_url",
           "outcome", "scrub_secrets", "OUTCOMES", "DEFAULT_MAX_RESPONSE_BYTES"]

#: Every ``JudgeError.kind`` and what a caller does about it.
OUTCOMES = {
    "timeout": "fallback",  # APITimeoutError after the retries, or the call's deadline ran out
    "connection": "fallback",  # APIConnectionError: refused, reset, disconnected, truncated body
    "rate_limited": "fallback",  # RateLimitError (429) after the retries
    "server_error": "fallback",  # InternalServerError (5xx), 408, 409 after the retries
    "bad_response": "fallback",  # a 2xx body that is not a chat completion (malformed JSON, no choices)
    "too_large": "fallback",  # a 2xx body longer than max_response_bytes (reading stopped)
    "config": "stop",  # 401, 403, 404, 405, "model not found": the key, the URL or the model is wrong
    "client_error": "refused",  # any other 4xx: this request was rejected (context length, content filter)
    "unexpected": "refused",  # anything else (a bug)
}
#: SDK status-error classes with a fixed kind; other statuses: see ``JudgeClient.error_from``.
_STATUS_CLASSES = ((openai.RateLimitError, "rate_limited"), (openai.InternalServerError, "server_error"),
                   (openai.AuthenticationError, "config"), (openai.PermissionDeniedError, "config"),
                   (openai.NotFoundError, "config"))
#: "The model `x` does not exist", "model_not_found", "Unknown model: x", "no such model" ...
_MODEL_MISSING = re.compile(r"model_not_found|(?:unknown|invalid|no such) model|model\b.{0,200}?\b(?:not found|does not "
                            r"exist|not exist|is not (?:available|served|supported))", re.IGNORECASE | re.DOTALL)
DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
#: Shortest piece of a secret that is scrubbed from error texts (shorter secrets: the whole secret).
SECRET_PIECE = 8
_MESSAGE_CHARS = 300
_WITHHELD = "(reply text withheld: it contains part of a secret)"
#: HTTP attempts of the running call, counted by the transport (the SDK retries inside one call).
_ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("judge_attempts", default=None)
#: The SDK's api_key when there is none; the transport drops its header (no key may reach verl's router).
_NO_KEY = "verl-judge-no-key"
_SHARD = 8  # connections per httpcore pool (see _Transport)


@dataclass(frozen=True)
class JudgeError:
    """Why a call produced no reply. ``message`` is safe to log (no secrets, bounded length)."""

    kind: str
    message: str
    status: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}{'' if self.status is None else f' (HTTP {self.status})'}: {self.message}"


def outcome(error: JudgeError | None) -> str:
    """``"ok"`` (no error), ``"fallback"``, ``"stop"`` or ``"refused"``; see ``OUTCOMES``."""
    return "ok" if error is None else OUTCOMES.get(error.kind, "refused")


class JudgeConfigError(RuntimeError):
    """The endpoint rejected the configuration (key, URL or model): stop the run. ``url`` is scrubbed."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None, error: JudgeError | None = None):
        super().__init__(message)
        self.url, self.status, self.error = url, status, error


class ReplyRefused(httpx.TransportError):
    """A 2xx reply the transport refused (``kind``: ``too_large`` or ``bad_response``). A transport error:
    the SDK retries it like a dropped connection, then raises ``APIConnectionError`` from it. The reason
    (``detail``, which may quote the server) is kept out of the message: SDKs log their exceptions."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"2xx reply refused: {kind}")
        self.kind, self.detail = kind, detail


def scrub_secrets(text: str, secrets: Sequence[str]) -> tuple[str, bool]:
    """``text`` with every run of secret pieces replaced by ``***``; and whether anything was found.

    A piece is any substring of a secret at least ``SECRET_PIECE`` (8) characters long (for a
    shorter secret: the whole secret), matched case-insensitively. Linear in ``len(text)``.
    """
    text = str(text)
    low, hidden = text.lower(), [False] * len(text)
    for secret in secrets:
        if isinstance(secret, str) and secret:
            w, sec = min(SECRET_PIECE, len(secret)), secret.lower()
            pieces = {sec[i : i + w] for i in range(len(sec) - w + 1)}
            for i in range(len(low) - w + 1):
                if low[i : i + w] in pieces:
                    hidden[i : i + w] = [True] * w
    if not any(hidden):
        return text, False
    runs = groupby(range(len(text)), hidden.__getitem__)  # touching or overlapping pieces: one ***
    return "".join("***" if h else "".join(text[i] for i in idx) for h, idx in runs), True


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
    return None if content is None or isinstance(content, str) else f"message content is {type(content).__name__}, not text"


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process (building one reads the CA bundle: about 50 ms)."""
    return httpx.create_ssl_context()


class _Transport(httpx.AsyncBaseTransport):
    """One loop's HTTP transport: ``max_concurrency`` connections, bodies read up to a cap, attempts
    counted. The connections are split into pools of at most ``_SHARD``: httpcore's pool bookkeeping
    grows with the square of its size (about 18 ms of CPU per request at 64 connections in one pool,
    4 ms in pools of 8). The calls' semaphore (``_LoopState.slots``) keeps a connection free."""

    def __init__(self, max_concurrency: int, cap: int):
        self._room = [_SHARD] * (max_concurrency // _SHARD) + [max_concurrency % _SHARD] * bool(max_concurrency % _SHARD)
        self._pools = [httpx.AsyncHTTPTransport(verify=_tls(), limits=httpx.Limits(max_connections=n)) for n in self._room]
        self._cap = cap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"  # the cap counts body bytes, not compressed ones
        if request.headers.get("Authorization") == f"Bearer {_NO_KEY}":
            del request.headers["Authorization"]
        if (counter := _ATTEMPTS.get()) is not None:
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
        return httpx.Response(response.status_code, headers=response.headers, content=bytes(body[: self._cap]),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await asyncio.gather(*(pool.aclose() for pool in self._pools))


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


class _LRU:
    """Thread-safe bounded LRU of completed replies with an optional time-to-live."""

    def __init__(self, size: int, ttl: float | None):
        self.size, self.ttl, self._lock = max(0, int(size)), ttl, threading.Lock()
        self._data: dict[str, tuple[float, JudgeResult]] = {}  # oldest first

    def get(self, key: str) -> JudgeResult | None:
        with self._lock:
            stamp, value = self._data.pop(key, (0.0, None))
            if value is None or (self.ttl is not None and time.monotonic() - stamp > self.ttl):
                return None
            self._data[key] = (stamp, value)  # now the most recently used
            return value

    def put(self, key: str, value: JudgeResult) -> None:
        with self._lock:
            self._data.pop(key, None)
            self._data[key] = (time.monotonic(), value)
            while len(self._data) > self.size:
                del self._data[next(iter(self._data))]


class JudgeClient:
    """Async OpenAI-compatible chat-completions client: the SDK, a reply cap, a cache, typed errors.

    ``base_url``: an API base (``https://api.openai.com/v1``), a bare ``host:port`` (verl's
    ``reward_router_address``) or a full ``.../chat/completions`` URL. ``api_key_env``: the *name* of
    the key's variable (``None`` or unset: no ``Authorization`` header, whatever ``OPENAI_API_KEY``
    holds). ``timeout`` (per attempt: to connect, to send, between bytes of the reply) and
    ``max_retries`` go to the SDK; ``deadline`` bounds one ``complete`` call (waiting for a slot,
    attempts, retry sleeps). ``temperature``, ``max_tokens`` and ``extra_body`` make up every request
    body. ``cache_size`` 0 disables the cache and de-duplication. ``headers``: extra HTTP headers
    (scrubbed like the key).
    """

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = "OPENAI_API_KEY", timeout: float = 60.0,
                 max_retries: int = 4, deadline: float | None = None, max_concurrency: int = 64,
                 temperature: float = 0.0, max_tokens: int = 512, extra_body: dict | None = None,
                 cache_size: int = 4096, cache_ttl: float | None = None, headers: dict | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        if not model:
            raise ValueError("JudgeClient needs a model name")
        if timeout is None or float(timeout) <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        for name, value, least in (("max_retries", max_retries, 0), ("max_concurrency", max_concurrency, 1),
                                   ("max_response_bytes", max_response_bytes, 1)):
            if isinstance(value, bool) or int(value) < least:
                raise ValueError(f"{name} must be >= {least}, got {value!r}")
        self.url, self.model, self.api_key_env = chat_completions_url(base_url), str(model), api_key_env or None
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.deadline = None if deadline is None else float(deadline)
        self.max_concurrency, self.max_response_bytes = int(max_concurrency), int(max_response_bytes)
        self.params: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens), **(extra_body or {})}
        self._headers = dict(headers or {})
        self._cache, self._dedupe = _LRU(cache_size, cache_ttl), bool(cache_size)
        self._loops: dict[tuple[int, asyncio.AbstractEventLoop], _LoopState] = {}
        self._lock = threading.Lock()
        self.stats = {"calls": 0, "requests": 0, "retries": 0, "cache_hits": 0, "errors": 0}

    def __repr__(self) -> str:  # never shows the key or headers
        return (f"JudgeClient(url={mask_url(self.url)!r}, model={self.model!r}, api_key_env={self.api_key_env!r}, timeout="
                f"{self.timeout}, max_retries={self.max_retries}, max_concurrency={self.max_concurrency})")

    # ------------------------------------------------------------------ per-loop SDK clients
    def _key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _new_state(self) -> _LoopState:
        base, _, query = self.url.partition("?")
        http = httpx.AsyncClient(transport=_Transport(self.max_concurrency, self.max_response_bytes))
        sdk = openai.AsyncOpenAI(
            api_key=self._key() or _NO_KEY, base_url=base.removesuffix("/chat/completions"),
            default_query=dict(parse_qsl(query)) or None, default_headers=self._headers or None,
            max_retries=self.max_retries, http_client=http, timeout=self.timeout,
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
    def request_body(self, messages: Sequence[dict], **params: Any) -> dict:
        """The exact JSON body sent for ``messages`` (also the cache key's content)."""
        return {"model": self.model, "messages": [dict(m) for m in messages], **self.params, **params}

    def cache_key(self, body: dict) -> str:
        blob = json.dumps([self.url, body], sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    async def complete(self, messages: Sequence[dict], **params: Any) -> JudgeResult:
        """One chat completion (the SDK retries inside); ``params`` override request fields for this call."""
        self.stats["calls"] += 1
        body = self.request_body(messages, **params)
        if not self._dedupe:
            return await self._call(body)
        key = self.cache_key(body)
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

    async def batch(self, batch_messages: Sequence[Sequence[dict]], *,
                    on_result: Callable[[int, JudgeResult], None] | None = None, **params: Any) -> list[JudgeResult]:
        """Complete every conversation (at most ``max_concurrency`` in flight); results in input order."""

        async def one(i: int, msgs: Sequence[dict]) -> JudgeResult:
            res = await self.complete(msgs, **params)
            if on_result is not None:
                on_result(i, res)
            return res

        return list(await asyncio.gather(*(one(i, m) for i, m in enumerate(batch_messages))))

    def run_batch(self, batch_messages: Sequence[Sequence[dict]], **kwargs: Any) -> list[JudgeResult]:
        """Blocking ``batch`` for scripts (runs its own event loop; not for use inside a running loop)."""
        return asyncio.run(self.batch(batch_messages, **kwargs))

    async def _call(self, body: dict) -> JudgeResult:
        state = await self._state()
        start, counter = time.monotonic(), [0]
        token = _ATTEMPTS.set(counter)
        fields = {k: v for k, v in body.items() if k not in ("model", "messages")}

        async def send() -> Any:
            async with state.slots:  # first come, first served
                return await state.sdk.chat.completions.create(model=body["model"], messages=body["messages"],
                                                               extra_body=fields)

        try:
            reply, error = await asyncio.wait_for(send(), self.deadline), None
        except asyncio.TimeoutError:
            error = JudgeError("timeout", f"deadline of {self.deadline}s reached")
        except Exception as e:  # noqa: BLE001 - every failure becomes a typed error
            error = self.error_from(e)
        finally:
            _ATTEMPTS.reset(token)
        attempts = counter[0]
        self.stats["requests"] += attempts
        self.stats["retries"] += max(0, attempts - 1)
        if error is not None:
            self.stats["errors"] += 1
            return JudgeResult(None, error, attempts, time.monotonic() - start)
        choice = reply.choices[0]
        usage = reply.usage.model_dump(exclude_unset=True) if reply.usage is not None else None
        return JudgeResult(choice.message.content or "", None, attempts, time.monotonic() - start,
                           choice.finish_reason, usage=usage)

    # ------------------------------------------------------------------ errors
    def error_from(self, exc: Exception) -> JudgeError:
        """The SDK's exception (after its retries) as a ``JudgeError``; see ``OUTCOMES``."""
        if isinstance(exc, openai.APITimeoutError):
            return JudgeError("timeout", f"no reply within timeout={self.timeout}s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            if isinstance(cause, ReplyRefused):
                return JudgeError(cause.kind, self._echo(cause.detail), 200)
            return JudgeError("connection", self._scrub(f"{type(cause or exc).__name__}: {cause or exc}"))
        if isinstance(exc, openai.APIStatusError):
            status, said = exc.status_code, self._echo(exc.response.text)
            kind = next((k for cls, k in _STATUS_CLASSES if isinstance(exc, cls)), None)
            if kind is None:
                kind = ("server_error" if status in (408, 409) else "config" if status == 405 or
                        (400 <= status < 500 and _MODEL_MISSING.search(said)) else "client_error")
            return JudgeError(kind, said, status)
        return JudgeError("unexpected", self._scrub(f"{type(exc).__name__}: {exc}"))

    def _secrets(self) -> list[str]:
        key = self._key()
        return ([key] if key else []) + [v for v in self._headers.values() if isinstance(v, str) and len(v) >= SECRET_PIECE]

    def _scrub(self, text: str) -> str:
        """Our own message text, with every piece of a secret replaced (then cut to 300 chars)."""
        return mask_url(scrub_secrets(str(text)[: 4 * _MESSAGE_CHARS], self._secrets())[0])[:_MESSAGE_CHARS]

    def _echo(self, text: str) -> str:
        """Text a server sent: quoted (cut to 300 chars) only when it holds no piece of a secret."""
        head = str(text)[: 4 * _MESSAGE_CHARS]
        return _WITHHELD if scrub_secrets(head, self._secrets())[1] else head[:_MESSAGE_CHARS]

    def config_error(self, error: JudgeError | None) -> JudgeConfigError | None:
        """A ``JudgeConfigError`` naming the URL, the status and the likely fix, if ``error`` is one."""
        if outcome(error) != "stop":
            return None
        key, url, status = self._key(), self._scrub(self.url), error.status
        if self.api_key_env:
            key_hint = f"the environment variable {self.api_key_env!r} (api_key_env, {'set' if key else 'NOT set in this process'})"
        else:
            key_hint = "api_key_env (None: no key is sent; verl's reward router never gets one)"
        if _MODEL_MISSING.search(error.message):
            fix = (f"the model {self.model!r} is not served at this URL, or rejects a request field (the server's "
                   "message says which): check `model` (for a judge served by verl's reward loop, the served name "
                   "is the reward model's local path) and extra_body")
        elif status == 401:
            fix = f"the API key was rejected or is missing: check {key_hint}, and that it is exported to the reward workers"
        elif status == 403:
            fix = f"the key may not use this model or endpoint: check {key_hint}, `model` ({self.model!r}) and base_url"
        else:
            fix = ("no chat-completions endpoint at this URL: check base_url (an API base such as "
                   "https://api.openai.com/v1 or http://host:port/v1, or the full .../chat/completions URL)")
        said = f" Server said: {error.message}" if error.message else ""
        return JudgeConfigError(f"judge configuration error: POST {url} answered HTTP {status}. Likely fix: {fix}.{said}",
                                url=url, status=status, error=error)
