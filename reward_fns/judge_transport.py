"""The HTTP transport under the judge client's ``openai`` SDK: reply bodies read up to a cap, a 2xx reply that is not a
chat completion refused, HTTP attempts counted. No command of its own; used by ``reward_fns.judge_client``, which
hands it to the SDK as the transport of its ``httpx.AsyncClient``.

* ``Transport`` reads at most ``max_response_bytes`` of a body (uncompressed), refuses a longer 2xx reply or one that
  is not a chat completion (``ReplyRefused``: the SDK retries it like a dropped connection), cuts error bodies at the
  cap and counts the attempts of the running call (``ATTEMPTS``: the SDK retries inside one call).
* It holds ``max_concurrency`` connections, in pools of at most 8 (see ``Transport``).
* ``NO_KEY`` is the SDK's api_key when there is none; the transport drops its header (no key may reach verl's router).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import ssl

import httpx

DEFAULT_MAX_RESPONSE_BYTES = 1 << 20
#: HTTP attempts of the running call, counted by the transport (the SDK retries inside one call).
ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("judge_attempts", default=None)
#: The SDK's api_key when there is none; the transport drops its header (no key may reach verl's router).
NO_KEY = "verl-judge-no-key"
_SHARD = 8  # connections per httpcore pool (see Transport)


class ReplyRefused(httpx.TransportError):
    """A 2xx reply the transport refused (``kind``: ``too_large`` or ``bad_response``). A transport error:
    the SDK retries it like a dropped connection, then raises ``APIConnectionError`` from it. The reason
    (``detail``, which may quote the server) is kept out of the message: SDKs log their exceptions."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"2xx reply refused: {kind}")
        self.kind, self.detail = kind, detail


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
