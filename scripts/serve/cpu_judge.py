"""A small real OpenAI-compatible chat server around ``transformers`` generate, on the CPU.

The cheap real judge server for CI (vLLM's CPU build is the production-like one: ``scripts/serve/cpu_judge.sh``):
``POST /v1/chat/completions`` applies the chat template and generates greedily (temperature is ignored; a judge runs
at 0), batching whatever arrives while busy (up to ``--max-batch``); ``GET /v1/models`` lists the served name (the
model path unless ``--served-model-name``; another model gets 404).

    python -m scripts.serve.cpu_judge --model PATH [--host 127.0.0.1] [--port 8000] [--max-batch 16]

Prints ``READY host:port`` on stdout once the model is loaded and the port is open.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import sys
import threading
import time
import uuid

from aiohttp import web


class Generator:
    """Owns the model; a worker thread drains a queue of requests in batches."""

    def __init__(self, model_path: str, max_batch: int, max_new_tokens_cap: int, threads: int | None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_path, padding_side="left")
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
        self.max_batch, self.cap, self.q = max_batch, max_new_tokens_cap, queue.Queue()
        threading.Thread(target=self._worker, name="generate", daemon=True).start()

    def submit(self, loop: asyncio.AbstractEventLoop, messages: list[dict], max_tokens: int) -> asyncio.Future:
        fut = loop.create_future()
        self.q.put((loop, fut, messages, max_tokens))
        return fut

    def _worker(self) -> None:
        while True:
            items = [self.q.get()]
            while len(items) < self.max_batch:
                try:
                    items.append(self.q.get_nowait())
                except queue.Empty:
                    break
            try:
                outs = self._generate([(m, n) for _, _, m, n in items])
            except Exception as e:  # report to every waiter, keep serving
                outs = [e] * len(items)
            for (loop, fut, _, _), out in zip(items, outs):
                loop.call_soon_threadsafe(_settle, fut, out)

    def _generate(self, reqs: list[tuple[list[dict], int]]) -> list[tuple[str, str, int, int]]:
        torch = self.torch
        prompts = [self.tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m, _ in reqs]
        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        limits = [max(1, min(int(n), self.cap)) for _, n in reqs]
        with torch.inference_mode():
            out = self.model.generate(
                **enc, max_new_tokens=max(limits), do_sample=False, pad_token_id=self.tok.pad_token_id
            )
        new = out[:, enc["input_ids"].shape[1] :]
        eos = self.tok.eos_token_id
        results = []
        for i, limit in enumerate(limits):
            ids = new[i].tolist()[:limit]
            ids, finish = (ids[: ids.index(eos)], "stop") if eos in ids else (ids, "length")
            prompt_tokens = int(enc["attention_mask"][i].sum())
            results.append((self.tok.decode(ids, skip_special_tokens=True), finish, prompt_tokens, len(ids)))
        return results


def _settle(fut: asyncio.Future, out) -> None:
    if not fut.done():
        fut.set_exception(out) if isinstance(out, Exception) else fut.set_result(out)


def build_app(gen: Generator, served_name: str) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": served_name, "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            messages = body["messages"]
            assert isinstance(messages, list) and messages
        except Exception:
            return web.json_response({"error": {"message": "body must be JSON with a messages list"}}, status=400)
        if body.get("model") != served_name:
            return web.json_response(
                {"error": {"message": f"The model `{body.get('model')}` does not exist.", "code": 404}}, status=404
            )
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 256
        try:
            text, finish, p_tok, c_tok = await gen.submit(asyncio.get_running_loop(), messages, max_tokens)
        except Exception as e:
            return web.json_response({"error": {"message": f"generation failed: {type(e).__name__}"}}, status=500)
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": served_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok},
            }
        )

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.serve.cpu_judge", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="HF model folder")
    ap.add_argument("--served-model-name", default=None, help="default: the --model path (as vllm serve)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--max-new-tokens-cap", type=int, default=512)
    threads_help = "torch threads (default 1: on a small shared CPU, spinning OpenMP threads oversubscribe badly)"
    ap.add_argument("--threads", type=int, default=1, help=threads_help)
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    gen = Generator(args.model, args.max_batch, args.max_new_tokens_cap, args.threads)
    app = build_app(gen, args.served_model_name or args.model)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        print(f"READY {args.host}:{port}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
