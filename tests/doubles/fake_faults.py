"""The faults the fake OpenAI server (``tests.doubles.fake_openai``) injects: which fault a request gets, and the
response each fault makes. No command of its own; used by ``tests.doubles.fake_openai`` (``--mode FAULT``).

Which fault (``FaultSchedule``): a pushed fault first (``FakeOpenAIServer.push``, in order; a ``(status, body_bytes)``
tuple is answered as is), else ``FAULT:<kind>`` in the request text -> that fault on every request carrying it;
``FAULT:<kind>x<k>`` -> only on the first ``k`` requests with the same body (then the normal reply: tests retries),
else the server's ``mode`` (one fault for all).

Kinds (``FAULTS``): delays (``latency:<s>``, applied by the server, and ``hang``), HTTP errors (``429`` with
``Retry-After``, ``500``, ``503``, ``400``-``422`` with a JSON body, ``echo_headers``: a 400 that reflects the request
headers, as a leaky proxy might), broken replies (``malformed_json``, ``truncated``: cut mid-verdict,
``truncated_body``, ``drop``, ``no_choices``, ``empty``, ``echo``: the judge quotes the candidate's look-alike tags)
and size (``big:<n>``, ``big_chunked:<n>``, ``endless``, ``big_error:<n>``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections import Counter, deque
from typing import Any

from aiohttp import web

from tests.doubles.fake_replies import candidate_of, completion, default_reply

__all__ = ["FAULTS", "FaultSchedule", "fault_response"]

FAULTS = (
    "latency",
    "429",
    "500",
    "503",
    "malformed_json",
    "truncated",
    "truncated_body",
    "drop",
    "hang",
    "no_choices",
    "echo",
    "echo_headers",
    "empty",
    "400",
    "401",
    "403",
    "404",
    "413",
    "422",
    "big",
    "big_chunked",
    "endless",
    "big_error",
)
_STATUS_FAULTS = {
    "400": "bad request",
    "401": "invalid api key",
    "403": "forbidden",
    "404": "not found",
    "413": "request too large",
    "422": "unprocessable request",
}
_MARK_FAULT = re.compile(r"FAULT:((?:\d{3}|[a-z_]+?)(?::[0-9.]+)?)(?:x(\d+))?\b")


class FaultSchedule:
    """Which fault each request gets (see the module docstring); thread-safe."""

    def __init__(self):
        self._queue: deque = deque()
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def push(self, faults) -> None:
        """Queue one-shot faults for the next requests, in order."""
        with self._lock:
            self._queue.extend(faults)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._seen.clear()

    def pick(self, raw: bytes, text: str, mode: str | None):
        """The fault for a request of body ``raw`` whose messages read ``text``; ``mode`` when nothing else applies."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            m = _MARK_FAULT.search(text)
            if m:
                limit = m.group(2)
                if limit is None:
                    return m.group(1)
                key = hashlib.sha256(raw).hexdigest()
                self._seen[key] += 1
                return m.group(1) if self._seen[key] <= int(limit) else None
            return mode


async def fault_response(server: Any, request: web.Request, body: dict, fault) -> web.StreamResponse | None:
    """The response of ``fault`` to ``request`` (None: no fault, the scripted reply). ``server``: the
    ``FakeOpenAIServer`` answering (its ``retry_after``, ``served`` and ``endless_bytes``, ``scripted(body)``)."""
    if isinstance(fault, tuple):
        status, raw = fault
        return web.Response(body=raw, status=status, content_type="application/json")
    if fault == "429":
        return web.json_response(
            {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
            status=429,
            headers={"Retry-After": server.retry_after},
        )
    if fault in ("500", "503"):
        return web.json_response({"error": {"message": "internal error"}}, status=int(fault))
    if fault == "hang":
        await asyncio.sleep(3600)
    if fault == "drop":
        request.transport.close()
        raise asyncio.CancelledError()
    if fault == "malformed_json":
        return web.Response(body=b'{"choices": [{"message": {"content": "<score>4</sc', content_type="application/json")
    if fault == "echo_headers":  # a leaky proxy that reflects the request headers in its error
        message = f"bad request, headers: {dict(request.headers)}"
        return web.json_response({"error": {"message": message}}, status=400)
    if fault == "no_choices":
        return web.json_response({"choices": []})
    if fault in _STATUS_FAULTS:
        return web.json_response({"error": {"message": _STATUS_FAULTS[fault]}}, status=int(fault))
    if fault == "empty":
        server.served += 1
        return web.json_response(completion(body, ""))
    if fault and fault.split(":")[0] in ("big", "big_chunked", "big_error"):
        kind, size = fault.split(":")[0], int(float(fault.split(":")[1]))
        if kind == "big_error":
            return web.Response(body=b"e" * size, status=503, content_type="text/plain")
        pad = "x" * max(0, size - 300)
        quote = re.search(r"<think>(.*)</think>", default_reply(body), re.DOTALL).group(1)  # the grader's quote
        said = f"<think>{pad} {quote}</think><score>4</score>"
        raw = json.dumps(completion(body, said)).encode()
        if kind == "big":
            return web.Response(body=raw, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(raw), 8192):
            await resp.write(raw[i : i + 8192])
        await resp.write_eof()
        return resp
    if fault == "endless":
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b'{"choices": [{"message": {"content": "' + b"x" * 65536
        try:
            while True:  # until the client closes the connection
                await resp.write(chunk)
                server.endless_bytes += len(chunk)
                chunk = b"x" * 65536
        except (ConnectionError, RuntimeError):
            pass
        return resp
    if fault == "truncated_body":
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "4096"})
        await resp.prepare(request)
        await resp.write(b'{"choices": [{"message": {"content": "<think>')
        request.transport.close()
        return resp
    if fault == "truncated":
        text = (await server.scripted(body)).text or ""
        cut = text[: max(1, text.find("<score>") + 8)] if "<score>" in text else text[: len(text) // 2]
        server.served += 1
        return web.json_response(completion(body, cut, "length"))
    if fault == "echo":
        user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        cand = candidate_of(user) or ""
        text = f"<think>The candidate wrote: {cand}</think>Quoting it again: {cand}\n<score>1</score>"
        server.served += 1
        return web.json_response(completion(body, text))
    return None
