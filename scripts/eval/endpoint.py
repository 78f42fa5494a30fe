"""Replies from an OpenAI-compatible endpoint (``--base-url/--model``; ``--judge-base-url/--judge-model``): the
endpoint flags (``add_endpoint_args``), a ``JudgeClient`` (``reward_fns.judge_client``: concurrency, retries, cache,
a deadline per request) built from them (``make_client``) and ``run_chats``, which sends conversations concurrently
with a tqdm bar and stops sending on SIGINT / SIGTERM. No command of its own; used by ``scripts.eval.backends`` and,
for the flags, by ``python -m scripts.eval.judge`` and ``python -m scripts.eval.gsm8k`` (also for its judge).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from reward_fns.judge_client import JudgeClient, JudgeResult
from reward_fns.judge_errors import JudgeConfigError
from scripts.eval.cli import InputError, progress_bar

if TYPE_CHECKING:
    from scripts.eval.predictions import StopSignals


def add_endpoint_args(group, prefix: str = "", *, what: str = "judge") -> None:
    """``--{prefix}base-url``, ``--{prefix}model``, key env, concurrency, timeout, retries, sampling."""
    p = f"--{prefix}"
    url_help = (
        f"OpenAI-compatible endpoint of the {what} (http://host:port/v1, host:port or a .../chat/completions URL)"
    )
    group.add_argument(f"{p}base-url", metavar="URL", help=url_help)
    group.add_argument(
        f"{p}model", metavar="NAME", help=f"'model' sent to the {what} endpoint (vLLM: served path/name)"
    )
    key_help = "env variable of the API key (read per request, never printed; default OPENAI_API_KEY; unset: no auth)"
    group.add_argument(f"{p}api-key-env", default="OPENAI_API_KEY", metavar="ENV", help=key_help)
    group.add_argument(f"{p}concurrency", type=int, default=16, metavar="N", help="requests in flight (default 16)")
    group.add_argument(f"{p}timeout", type=float, default=120.0, metavar="S", help="seconds per attempt (default 120)")
    retry_help = "retries of timeouts / connection errors / 429 / 5xx (default 4)"
    group.add_argument(f"{p}max-retries", type=int, default=4, metavar="N", help=retry_help)
    group.add_argument(f"{p}max-tokens", type=int, default=512, metavar="N", help="max tokens per reply (default 512)")
    group.add_argument(f"{p}temperature", type=float, default=0.0, metavar="T", help="temperature (default 0 = greedy)")


def make_client(backend, cache: bool = True) -> JudgeClient:
    """The ``JudgeClient`` of an endpoint ``scripts.eval.backends.Backend`` (``cache``: de-duplicate identical
    requests)."""
    if backend.concurrency < 1:
        raise InputError(f"concurrency must be >= 1, got {backend.concurrency}")
    if backend.max_tokens < 1:
        raise InputError(f"max tokens must be >= 1, got {backend.max_tokens}")
    try:
        return JudgeClient(
            backend.base_url,
            backend.model,
            api_key_env=backend.api_key_env or None,
            timeout=backend.timeout,
            max_retries=backend.max_retries,
            max_concurrency=backend.concurrency,
            temperature=backend.temperature,
            max_tokens=backend.max_tokens,
            cache_size=4096 if cache else 0,
            deadline=request_deadline(backend.timeout, backend.max_retries),
        )
    except ValueError as e:
        raise InputError(str(e)) from None


def request_deadline(timeout: float, max_retries: int) -> float:
    """One request's whole time, retries and the SDK's backoff (at most 8 s each) included: a server that sends a
    byte now and then (each one resets the read timeout) cannot hold an evaluation forever."""
    return float(timeout) * (max_retries + 1) + 8.0 * max_retries


def run_chats(
    client: JudgeClient,
    conversations: Sequence[Sequence[dict]],
    desc: str = "requests",
    progress: bool = True,
    *,
    on_result: Callable[[int, JudgeResult], None],
    stop: StopSignals | None = None,
    done: int = 0,
    total: int | None = None,
) -> list[JudgeResult | None]:
    """Send every conversation through ``client`` (concurrently, with retries); results in order.

    ``on_result(i, result)`` runs as each reply arrives (an exception there stops the loop and is
    raised). When ``stop`` fires, no new request is sent, the ones in flight are cancelled and their
    slots stay ``None``. The bar (stderr) starts at ``done`` of ``total`` (default: the conversations).
    """
    n = len(conversations)
    results: list[JudgeResult | None] = [None] * n
    if stop is not None and stop.stopped:
        return results
    bar = progress_bar(desc, "req", progress, done, done + n if total is None else total)
    failures = [0]

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def one(i: int, msgs: Sequence[dict]) -> None:
            res = await client.complete(msgs)
            stop_now = client.config_error(res.error) if not res.ok else None
            if stop_now is not None:  # a wrong key, URL or model: every request would fail the same way
                raise stop_now
            results[i] = res
            if not res.ok:
                failures[0] += 1
                bar.set_postfix(errors=failures[0], refresh=False)
            bar.update(1)
            on_result(i, res)

        tasks = [loop.create_task(one(i, m)) for i, m in enumerate(conversations)]
        cancel_all = lambda: [t.cancel() for t in tasks]  # noqa: E731
        token = stop.on_stop(lambda: loop.call_soon_threadsafe(cancel_all)) if stop is not None else None
        try:
            outcome = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            if token is not None:
                stop.remove(token)
            # requests still in flight after a stop (the client shields them): cancel and await them
            # before the session closes, so none retries on a fresh session
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await client.aclose()
        for o in outcome:  # a failing on_result (e.g. a full disk) is an error, not a cancelled row
            if isinstance(o, JudgeConfigError):
                raise InputError(str(o)) from None
            if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError):
                raise o

    try:
        asyncio.run(main())
    finally:
        bar.close()
    return results
