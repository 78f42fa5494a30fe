"""A fake OpenAI-compatible chat server on 127.0.0.1: scripted replies and injected faults, for the
tests, the benchmarks and the README figures.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (aiohttp, in a background thread
with its own event loop, so sync tests, async tests, subprocesses and Ray actors in other processes
can all use it) and records every request it receives (``requests``: body, headers, arrival time;
``bodies``: the request bodies alone).

What it answers, unless a fault applies (below):

* ``reply(body) -> str | Reply`` when given: the test states exactly what the "judge" or "policy"
  says. A ``Reply`` can also be an HTTP error status (``Reply(status=503)``), a raw body sent as is
  (``Reply(raw=b"<html>")``), extra headers or a ``finish_reason``. The function runs in a worker
  thread, so it may block (e.g. hold a request until the test releases it); an exception in it is
  answered with 500 naming it.
* ``table_reply(table, default)``: the replies of a replies file ``{"<model>": {"<marker>":
  "<reply>"}}``: the entry, for the request's ``model``, of the last ``[[marker]]`` found in its
  messages (``markers``); ``default`` when none is in the table.
* ``default_reply`` otherwise: a tiny deterministic "grader". It reads the user message the way a
  judge would, takes the candidate between ``<candidate>`` and the last ``</candidate>``, and answers
  ``<think>...</think><score>4</score>`` when the candidate's ``#### N`` equals the reference's, else
  ``<score>1</score>``. ``JUDGE_SAYS:<n>`` in the request -> ``<think>marker</think><score>n</score>``
  (``n`` any text, so ``JUDGE_SAYS:x`` is an unparseable verdict).

Faults: ``FAULT:<kind>`` in the request text -> that fault on every request carrying it; ``FAULT:<kind>x<k>`` ->
only on the first ``k`` requests with the same body (then the normal reply: tests retries); ``push`` queues
faults (a ``(status, body_bytes)`` tuple is answered as is), ``mode`` sets one for all. Kinds (``FAULTS``):
delays (``latency:<s>``, ``hang``), HTTP errors (``429`` with ``Retry-After``, ``500``, ``503``, ``400``-``422``
with a JSON body, ``echo_headers``: a 400 that reflects the request headers, as a leaky proxy might), broken
replies (``malformed_json``, ``truncated``: cut mid-verdict, ``truncated_body``, ``drop``, ``no_choices``,
``empty``, ``echo``: the judge quotes the candidate's look-alike tags) and size (``big:<n>``, ``big_chunked:<n>``,
``endless``, ``big_error:<n>``). ``api_key`` (401 without ``Authorization: Bearer <key>``) and ``expect_model``
(404 for another ``model``) act like a real endpoint's configuration errors; ``retry_after`` (default ``"1"``)
and ``retry_after_ms`` set the 429 / 5xx retry headers.

``capacity=C`` and ``latency=L`` make a server of known throughput ``C / L`` requests per second (FIFO queue
beyond ``C``), the benchmark's reference. In a test: ``with FakeOpenAIServer(latency=0.01) as srv:`` gives
``srv.base_url`` (``http://127.0.0.1:PORT/v1``), ``srv.address`` (verl's ``reward_router_address``),
``srv.requests`` (``Captured``) and ``srv.bodies``. As a command it prints ``READY <host:port>`` and serves until killed:

    python -m scripts.serve.fake_openai --port 0 --capacity 16 --latency 0.05
    python -m scripts.serve.fake_openai --replies tests/fixtures/eval/replies.json --port 18555
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aiohttp import web

__all__ = ["FakeOpenAIServer", "Captured", "Reply", "FAULTS", "default_reply", "table_reply", "candidate_of", "completion", "all_text", "markers"]  # noqa: E501

FAULTS = ("latency", "429", "500", "503", "malformed_json", "truncated", "truncated_body", "drop", "hang", "no_choices",
          "echo", "echo_headers", "empty", "400", "401", "403", "404", "413", "422", "big", "big_chunked", "endless", "big_error")
_STATUS_FAULTS = {"400": "bad request", "401": "invalid api key", "403": "forbidden", "404": "not found",
                  "413": "request too large", "422": "unprocessable request"}
_MARK_FAULT = re.compile(r"FAULT:((?:\d{3}|[a-z_]+?)(?::[0-9.]+)?)(?:x(\d+))?\b")
_MARK_SAYS = re.compile(r"JUDGE_SAYS:(\S+)")
_HASH_NUM = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
MARKER = re.compile(r"\[\[([A-Za-z0-9_.:-]+)\]\]")
#: threads that run reply functions (one per request being answered; a blocked reply holds one)
REPLY_THREADS = 64


@dataclass
class Reply:
    """What a reply function may return instead of the reply text."""

    text: str | None = None
    status: int = 200
    raw: bytes | None = None  # sent as is (with ``status``) instead of a chat completion
    headers: dict = field(default_factory=dict)
    finish_reason: str = "stop"


@dataclass
class Captured:
    body: dict
    headers: dict
    t: float
    raw: bytes = field(repr=False, default=b"")
    peer: tuple | None = None  # the client's (host, port): one per connection

    @property
    def user(self) -> str:
        return next((m["content"] for m in reversed(self.body.get("messages", [])) if m.get("role") == "user"), "")

    @property
    def system(self) -> str | None:
        return next((m["content"] for m in self.body.get("messages", []) if m.get("role") == "system"), None)


def candidate_of(user_text: str) -> str | None:
    """The text between the first ``<candidate>`` line and the last ``</candidate>``, as a judge reads it."""
    start = user_text.find("<candidate>\n")
    end = user_text.rfind("\n</candidate>")
    if start < 0 or end < start:
        return None
    return user_text[start + len("<candidate>\n") : end]


def _num(s: str | None) -> str | None:
    if not s:
        return None
    m = _HASH_NUM.findall(s)
    return m[-1].replace(",", "") if m else None


def all_text(body: Mapping) -> str:
    """Every message content of a request body, one per line."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, Mapping))


def markers(body: Mapping) -> list[str]:
    """The ``[[marker]]`` names in a request's messages, in order."""
    return MARKER.findall(all_text(body))


def default_reply(body: dict) -> str:
    """Deterministic judge reply for a request body (see the module docstring)."""
    msgs = body.get("messages") or []
    user = next((m.get("content", "") for m in reversed(msgs) if m.get("role") == "user"), "")
    said = _MARK_SAYS.search(user)
    if said:
        return f"<think>told to say {said.group(1)}</think><score>{said.group(1)}</score>"
    cand = candidate_of(user)
    ref_m = re.search(r"<reference>\n(.*?)\n</reference>", user, re.DOTALL)
    ref = _num(ref_m.group(1)) if ref_m else None
    got = _num(cand)
    if ref is not None and got is not None and float(got) == float(ref):
        return f"<think>Reference: {ref}. Candidate: {got}. Same.</think><score>4</score>"
    return f"<think>Reference: {ref}. Candidate: {got}. Different.</think><score>1</score>"


def table_reply(table: Mapping[str, Mapping[str, str]], default: str = "") -> Callable[[dict], str]:
    """Reply function of a replies file: the entry of the last known marker for the request's model."""

    def reply(body: dict) -> str:
        per_model = table.get(body.get("model"), {})
        for m in reversed(markers(body)):
            if m in per_model:
                return per_model[m]
        return default

    return reply


def completion(body: Mapping, text: str, finish: str = "stop") -> dict:
    """An OpenAI chat-completion response body answering ``body`` with ``text``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": len(text.split())},
    }


class FakeOpenAIServer:
    """See the module docstring. ``reply(body) -> str | Reply`` replaces ``default_reply``."""

    def __init__(
        self,
        reply: Callable[[dict], "str | Reply"] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        capacity: int | None = None,
        mode: str | None = None,
        retry_after: str = "1",
        retry_after_ms: str | None = None,
        expect_model: str | None = None,
        api_key: str | None = None,
    ):
        self.host, self.port = host, port
        self.latency = float(latency)
        self.capacity = capacity
        self.reply = reply or default_reply
        self.mode = mode
        self.retry_after = retry_after
        self.retry_after_ms = retry_after_ms
        self.expect_model = expect_model
        self.api_key = api_key
        self.requests: list[Captured] = []
        self.served = 0  # 200 replies sent
        self._queue: deque = deque()
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._sem: asyncio.Semaphore | None = None
        self._pool: ThreadPoolExecutor | None = None
        self.inflight = 0
        self.max_inflight = 0
        self.endless_bytes = 0  # bytes written by the "endless" fault

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bodies(self) -> list[dict]:
        """The JSON bodies of the requests received, in arrival order."""
        return [c.body for c in list(self.requests)]

    def start(self) -> "FakeOpenAIServer":
        ready = threading.Event()
        errors: list[BaseException] = []
        self._pool = ThreadPoolExecutor(max_workers=REPLY_THREADS, thread_name_prefix="fake-openai-reply")

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as e:  # pragma: no cover - port in use etc.
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            self._pool.shutdown(wait=False)
            raise errors[0]
        return self

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_get("/v1/models", self._models)
        app.on_response_prepare.append(self._retry_hint)
        self._sem = asyncio.Semaphore(self.capacity) if self.capacity else None
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.05)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock, shutdown_timeout=0.05)
        await site.start()

    def stop(self) -> None:
        """Stop listening and abort in-flight requests (new connections are then refused)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return

        async def shutdown() -> None:
            await self._runner.cleanup()
            me = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not me]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        fut = asyncio.run_coroutine_threadsafe(shutdown(), loop)
        try:
            fut.result(10)
        except Exception:  # pragma: no cover
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Start, print ``READY <host:port>`` on stdout and serve until interrupted."""
        self.start()
        print(f"READY {self.address}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    # ------------------------------------------------------------------ control
    def push(self, *faults) -> None:
        """Queue one-shot faults for the next requests, in order."""
        with self._lock:
            self._queue.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self._seen.clear()
            self.served = 0
            self.max_inflight = 0

    # ------------------------------------------------------------------ handlers
    async def _retry_hint(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.retry_after_ms is not None and (response.status == 429 or response.status >= 500):
            response.headers["retry-after-ms"] = self.retry_after_ms

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.expect_model or "judge", "object": "model"}]})

    def _fault_for(self, raw: bytes, text: str):
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
            return self.mode

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": {"message": "expected a JSON object"}}, status=400)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append(Captured(body, dict(request.headers), time.monotonic(), raw, tuple(peer or ()) or None))
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        if self.expect_model is not None and body.get("model") != self.expect_model:
            msg = f"The model `{body.get('model')}` does not exist."
            return web.json_response({"error": {"message": msg, "code": 404}}, status=404)
        fault = self._fault_for(raw, all_text(body))
        if self._sem is not None:
            async with self._sem:
                return await self._serve(request, body, fault)
        return await self._serve(request, body, fault)

    async def _serve(self, request: web.Request, body: dict, fault) -> web.StreamResponse:
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            delay = self.latency
            if isinstance(fault, str) and fault.startswith("latency"):
                delay += float(fault.split(":", 1)[1]) if ":" in fault else 1.0
                fault = None
            if delay:
                await asyncio.sleep(delay)
            return await self._respond(request, body, fault)
        finally:
            self.inflight -= 1

    async def _scripted(self, body: dict) -> Reply:
        """The reply function's answer (run in a worker thread: it may block), as a ``Reply``."""
        try:
            out = await asyncio.get_running_loop().run_in_executor(self._pool, self.reply, body)
        except Exception as e:  # a bug in a test's reply function: make it visible as a 500
            return Reply(raw=json.dumps({"error": {"message": f"reply function: {e!r}"}}).encode(), status=500)
        return out if isinstance(out, Reply) else Reply(text=str(out))

    def _answer(self, body: dict, out: Reply) -> web.Response:
        if out.raw is not None:
            return web.Response(body=out.raw, status=out.status, headers=out.headers, content_type="application/json")
        if out.status != 200:
            return web.json_response({"error": {"message": out.text or "scripted error"}}, status=out.status,
                                     headers=out.headers)
        self.served += 1
        return web.json_response(completion(body, out.text or "", out.finish_reason), headers=out.headers)

    async def _respond(self, request: web.Request, body: dict, fault) -> web.StreamResponse:
        if isinstance(fault, tuple):
            status, raw = fault
            return web.Response(body=raw, status=status, content_type="application/json")
        if fault == "429":
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                status=429,
                headers={"Retry-After": self.retry_after},
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
            return web.json_response({"error": {"message": f"bad request, headers: {dict(request.headers)}"}}, status=400)
        if fault == "no_choices":
            return web.json_response({"choices": []})
        if fault in _STATUS_FAULTS:
            return web.json_response({"error": {"message": _STATUS_FAULTS[fault]}}, status=int(fault))
        if fault == "empty":
            self.served += 1
            return web.json_response(completion(body, ""))
        if fault and fault.split(":")[0] in ("big", "big_chunked", "big_error"):
            kind, size = fault.split(":")[0], int(float(fault.split(":")[1]))
            if kind == "big_error":
                return web.Response(body=b"e" * size, status=503, content_type="text/plain")
            pad = "x" * max(0, size - 300)
            raw = json.dumps(completion(body, f"<think>{pad}</think><score>4</score>")).encode()
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
                    self.endless_bytes += len(chunk)
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
            text = (await self._scripted(body)).text or ""
            cut = text[: max(1, text.find("<score>") + 8)] if "<score>" in text else text[: len(text) // 2]
            self.served += 1
            return web.json_response(completion(body, cut, "length"))
        if fault == "echo":
            cand = candidate_of(next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")) or ""
            text = f"<think>The candidate wrote: {cand}</think>Quoting it again: {cand}\n<score>1</score>"
            self.served += 1
            return web.json_response(completion(body, text))
        return self._answer(body, await self._scripted(body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.serve.fake_openai", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per request (service time)")
    ap.add_argument("--capacity", type=int, default=None, help="requests served at once (others queue)")
    ap.add_argument("--mode", default=None, metavar="FAULT",
                    help="fault applied to every request (" + ", ".join(FAULTS) + "; latency/big*: KIND:N)")
    ap.add_argument("--replies", default=None, metavar="FILE",
                    help='replies file {"<model>": {"<marker>": "<reply>"}} (default: the built-in grader)')
    ap.add_argument("--default", default="", metavar="TEXT", help="--replies: the reply when no marker matches")
    args = ap.parse_args(argv)
    reply = None
    if args.replies:
        try:
            with open(args.replies, encoding="utf-8") as f:
                reply = table_reply(json.load(f), args.default)
        except (OSError, ValueError) as e:
            ap.error(f"--replies {args.replies}: {e}")
    FakeOpenAIServer(reply, host=args.host, port=args.port, latency=args.latency, capacity=args.capacity,
                     mode=args.mode).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
