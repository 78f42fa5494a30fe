"""A fake OpenAI-compatible chat server on 127.0.0.1: scripted replies and injected faults, for the tests, the
benchmarks and the README figures.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (aiohttp, in a background thread with its own event
loop, so sync tests, async tests, subprocesses and Ray actors in other processes can all use it) and records every
request it receives (``requests``: body, headers, arrival time; ``bodies``: the request bodies alone).

What it answers: the reply function ``reply(body) -> str | Reply``, a replies file (``--replies``) or the built-in
grader (``tests.doubles.fake_replies``), unless a fault applies (``tests.doubles.fake_faults``: ``FAULT:<kind>``
markers in the request, ``push``, ``mode``). The reply function runs in a worker thread, so it may block (e.g. hold a
request until the test releases it); an exception in it is answered with 500 naming it. ``api_key`` (401 without
``Authorization: Bearer <key>``) and ``expect_model`` (404 for another ``model``) act like a real endpoint's
configuration errors; ``retry_after`` (default ``"1"``) and ``retry_after_ms`` set the 429 / 5xx retry headers.

``capacity=C`` and ``latency=L`` make a server of known throughput ``C / L`` requests per second (FIFO queue beyond
``C``), the benchmark's reference. In a test: ``with FakeOpenAIServer(latency=0.01) as srv:`` gives ``srv.base_url``
(``http://127.0.0.1:PORT/v1``), ``srv.address`` (verl's ``reward_router_address``), ``srv.requests`` (``Captured``)
and ``srv.bodies``. As a command it prints ``READY <host:port>`` and serves until killed:

    python -m tests.doubles.fake_openai --port 0 --capacity 16 --latency 0.05
    python -m tests.doubles.fake_openai --replies tests/fixtures/eval/replies.json --port 18555
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from aiohttp import web

from tests.doubles.fake_faults import FAULTS, FaultSchedule, fault_response
from tests.doubles.fake_replies import Reply, all_text, completion, default_reply, table_reply

__all__ = ["FakeOpenAIServer", "Captured"]

#: threads that run reply functions (one per request being answered; a blocked reply holds one)
REPLY_THREADS = 64


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
        self._faults = FaultSchedule()
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
        self._faults.push(faults)

    def reset(self) -> None:
        self._faults.clear()
        self.requests.clear()
        self.served = 0
        self.max_inflight = 0

    # ------------------------------------------------------------------ handlers
    async def _retry_hint(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.retry_after_ms is not None and (response.status == 429 or response.status >= 500):
            response.headers["retry-after-ms"] = self.retry_after_ms

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.expect_model or "judge", "object": "model"}]})

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
        fault = self._faults.pick(raw, all_text(body), self.mode)
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

    async def scripted(self, body: dict) -> Reply:
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
            return web.json_response(
                {"error": {"message": out.text or "scripted error"}}, status=out.status, headers=out.headers
            )
        self.served += 1
        return web.json_response(completion(body, out.text or "", out.finish_reason), headers=out.headers)

    async def _respond(self, request: web.Request, body: dict, fault) -> web.StreamResponse:
        response = await fault_response(self, request, body, fault)
        return self._answer(body, await self.scripted(body)) if response is None else response


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.doubles.fake_openai", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 (default) picks a free port")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per request (service time)")
    ap.add_argument("--capacity", type=int, default=None, help="requests served at once (others queue)")
    ap.add_argument(
        "--mode",
        default=None,
        metavar="FAULT",
        help="fault applied to every request (" + ", ".join(FAULTS) + "; latency/big*: KIND:N)",
    )
    ap.add_argument(
        "--replies",
        default=None,
        metavar="FILE",
        help='replies file {"<model>": {"<marker>": "<reply>"}} (default: the built-in grader)',
    )
    ap.add_argument("--default", default="", metavar="TEXT", help="--replies: the reply when no marker matches")
    args = ap.parse_args(argv)
    reply = None
    if args.replies:
        try:
            with open(args.replies, encoding="utf-8") as f:
                reply = table_reply(json.load(f), args.default)
        except (OSError, ValueError) as e:
            ap.error(f"--replies {args.replies}: {e}")
    FakeOpenAIServer(
        reply, host=args.host, port=args.port, latency=args.latency, capacity=args.capacity, mode=args.mode
    ).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
