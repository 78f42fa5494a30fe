"""Where the evaluators' replies come from: an OpenAI-compatible endpoint (``--base-url/--model``),
``vllm.LLM`` on this machine's GPU (``--vllm-offline MODEL_PATH``) or transformers on CPU or GPU
(``--hf-offline MODEL_PATH``). ``generate`` picks the backend the arguments name and returns
``JudgeResult`` objects (``reward_fns.judge_client``) either way, so an evaluator never cares which one
answered. Endpoint requests go through ``JudgeClient`` (concurrency, retries, cache) with a tqdm bar.
Used by ``python -m scripts.eval.judge`` and ``python -m scripts.eval.gsm8k`` (``--help`` lists the flags).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from reward_fns.judge_client import JudgeClient, JudgeConfigError, JudgeError, JudgeResult, chat_completions_url
from reward_fns.redact import mask_url
from scripts.eval.cli import InputError

if TYPE_CHECKING:
    from scripts.eval.predictions import StopSignals

#: conversations per ``vllm.LLM.chat`` call: replies are saved (and a stop request honoured) between calls
VLLM_CHUNK = 1024


def add_endpoint_args(group, prefix: str = "", *, what: str = "judge", max_tokens: int = 512,
                      concurrency: int = 16, required: bool = False) -> None:
    """``--{prefix}base-url``, ``--{prefix}model``, key env, concurrency, timeout, retries, sampling."""
    p = f"--{prefix}"
    group.add_argument(f"{p}base-url", required=required, metavar="URL",
                       help=f"OpenAI-compatible endpoint of the {what} (http://host:port/v1, host:port, "
                            "or a full .../chat/completions URL)")
    group.add_argument(f"{p}model", required=required, metavar="NAME",
                       help=f"'model' field sent to the {what} endpoint (for vLLM: the served path or name)")
    group.add_argument(f"{p}api-key-env", default="OPENAI_API_KEY", metavar="ENV",
                       help="environment variable holding the API key (read at request time, never printed; "
                            "default OPENAI_API_KEY; unset = no Authorization header)")
    group.add_argument(f"{p}concurrency", type=int, default=concurrency, metavar="N",
                       help=f"requests in flight at once (default {concurrency})")
    group.add_argument(f"{p}timeout", type=float, default=120.0, metavar="S",
                       help="seconds per attempt (default 120)")
    group.add_argument(f"{p}max-retries", type=int, default=4, metavar="N",
                       help="retries of timeouts / connection errors / 429 / 5xx (default 4)")
    group.add_argument(f"{p}max-tokens", type=int, default=max_tokens, metavar="N",
                       help=f"max tokens of each reply (default {max_tokens})")
    group.add_argument(f"{p}temperature", type=float, default=0.0, metavar="T",
                       help="sampling temperature (default 0 = greedy)")


def make_client(base_url: str, model: str, *, api_key_env: str | None, concurrency: int, timeout: float,
                max_retries: int, max_tokens: int, temperature: float, cache: bool = True) -> JudgeClient:
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, got {concurrency}")
    if max_tokens < 1:
        raise InputError(f"max tokens must be >= 1, got {max_tokens}")
    try:
        return JudgeClient(
            base_url, model, api_key_env=api_key_env or None, timeout=timeout, max_retries=max_retries,
            max_concurrency=concurrency, temperature=temperature, max_tokens=max_tokens,
            cache_size=4096 if cache else 0, deadline=request_deadline(timeout, max_retries),
        )
    except ValueError as e:
        raise InputError(str(e)) from None


def request_deadline(timeout: float, max_retries: int) -> float:
    """One request's whole time, retries and the SDK's backoff (at most 8 s each) included: a server that sends a
    byte now and then (each one resets the read timeout) cannot hold an evaluation forever."""
    return float(timeout) * (max_retries + 1) + 8.0 * max_retries


OnResult = Callable[[int, int, JudgeResult], None]


def run_chats(client: JudgeClient, conversations: Sequence[Sequence[dict]], desc: str = "requests",
              progress: bool = True, *, on_result: Callable[[int, JudgeResult], None] | None = None,
              stop: StopSignals | None = None, done: int = 0, total: int | None = None) -> list[JudgeResult | None]:
    """Send every conversation through ``client`` (concurrently, with retries); results in order.

    ``on_result(i, result)`` runs as each reply arrives (an exception there stops the loop and is
    raised). When ``stop`` fires, no new request is sent, the ones in flight are cancelled and their
    slots stay ``None``. The bar (stderr) starts at ``done`` of ``total`` (default: the conversations).
    """
    from tqdm import tqdm

    n = len(conversations)
    results: list[JudgeResult | None] = [None] * n
    if stop is not None and stop.stopped:
        return results
    bar = tqdm(total=done + n if total is None else total, initial=done, desc=desc, unit="req",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
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
            if on_result is not None:
                on_result(i, res)

        tasks = [loop.create_task(one(i, m)) for i, m in enumerate(conversations)]

        def cancel_all() -> None:
            for t in tasks:
                t.cancel()

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


def vllm_chat(model_path: str, conversations: Sequence[Sequence[dict]], *, max_tokens: int, temperature: float,
              n: int = 1, seed: int = 0, llm_kwargs: Mapping | None = None, on_result: OnResult | None = None,
              stop: StopSignals | None = None) -> list[list[JudgeResult] | None]:
    """Offline generation with ``vllm.LLM.chat`` (GPU machine): ``n`` results per conversation.

    Conversations go in chunks of ``VLLM_CHUNK``; after each chunk ``on_result(i, k, result)`` runs
    for its replies and a stop request (``stop``) ends the loop (unfinished slots stay ``None``).
    """
    try:
        from vllm import LLM, SamplingParams
    except ImportError as e:
        raise InputError(
            f"--vllm-offline needs the 'vllm' package, which is not importable here ({e}). Install the GPU "
            "profile on a CUDA machine (bash scripts/setup_env.sh gpu), use --hf-offline MODEL_PATH "
            "(transformers, CPU or GPU), or serve the model (vllm serve MODEL_PATH) and use --base-url/--model."
        ) from None
    if not os.path.exists(model_path):
        raise InputError(f"--vllm-offline: model path not found: {model_path}")
    results: list[list[JudgeResult] | None] = [None] * len(conversations)
    if not conversations or (stop is not None and stop.stopped):
        return results
    llm = LLM(model=model_path, seed=seed, **dict(llm_kwargs or {}))
    params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    for lo in range(0, len(conversations), VLLM_CHUNK):
        if stop is not None and stop.stopped:
            break
        chunk = [list(c) for c in conversations[lo:lo + VLLM_CHUNK]]
        start = time.monotonic()
        outputs = llm.chat(chunk, params, use_tqdm=True)
        elapsed = time.monotonic() - start
        for j, out in enumerate(outputs):
            per = []
            for comp in out.outputs:
                per.append(JudgeResult(comp.text, None, attempts=1, latency_s=elapsed / max(1, len(outputs)),
                                       finish_reason=getattr(comp, "finish_reason", None)))
            while len(per) < n:  # defensive: never fewer than asked
                per.append(JudgeResult(None, JudgeError("bad_response", "vLLM returned fewer completions than n")))
            results[lo + j] = per
            if on_result is not None:
                for k, res in enumerate(per):
                    on_result(lo + j, k, res)
    return results


def hf_chat(model_path: str, conversations: Sequence[Sequence[dict]], *, max_tokens: int, temperature: float,
            n: int = 1, seed: int = 0, batch_size: int = 8, progress: bool = True,
            desc: str = "generate", on_result: OnResult | None = None, stop: StopSignals | None = None,
            done: int = 0, total: int | None = None) -> list[list[JudgeResult] | None]:
    """Offline generation with transformers (CPU or GPU): the model's chat template, left-padded batches
    of similar length, greedy at temperature 0. ``n`` results per conversation.

    After each batch ``on_result(i, k, result)`` runs for its replies; a stop request (``stop``) ends
    the loop before the next batch (unfinished slots stay ``None``)."""
    if not os.path.isdir(model_path):
        raise InputError(f"--hf-offline: model folder not found: {model_path}")
    results: list[list[JudgeResult] | None] = [None] * len(conversations)
    if not conversations or (stop is not None and stop.stopped):
        return results
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    tok = AutoTokenizer.from_pretrained(model_path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device).eval()
    torch.manual_seed(seed)
    ids = [tok.apply_chat_template(list(c), add_generation_prompt=True, tokenize=True, return_dict=False)
           for c in conversations]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    eos = {tok.eos_token_id} | set(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos])
    eos.discard(None)
    bar = tqdm(total=done + len(ids) if total is None else total, initial=done, desc=desc, unit="conv",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    try:
        for b in range(0, len(order), max(1, batch_size)):
            if stop is not None and stop.stopped:
                break
            chunk = order[b:b + batch_size]
            width = max(len(ids[i]) for i in chunk)
            input_ids = torch.full((len(chunk), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                input_ids[row, width - len(ids[i]):] = torch.tensor(ids[i])
                mask[row, width - len(ids[i]):] = 1
            start = time.monotonic()
            gen_kwargs = {"max_new_tokens": max_tokens, "num_return_sequences": n, "pad_token_id": tok.pad_token_id}
            if temperature > 0:
                gen_kwargs.update(do_sample=True, temperature=temperature)
            else:
                gen_kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            with torch.no_grad():
                out = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device), **gen_kwargs)
            elapsed = time.monotonic() - start
            new = out[:, width:].tolist()
            for row, i in enumerate(chunk):
                per = []
                for k in range(n):
                    toks = new[row * n + k]
                    stop_at = next((j for j, t in enumerate(toks) if t in eos), None)
                    finish = "stop" if stop_at is not None else "length"
                    text = tok.decode(toks if stop_at is None else toks[:stop_at], skip_special_tokens=True)
                    per.append(JudgeResult(text, None, attempts=1, latency_s=elapsed / len(chunk), finish_reason=finish))
                results[i] = per
                if on_result is not None:
                    for k, res in enumerate(per):
                        on_result(i, k, res)
            bar.update(len(chunk))
    finally:
        bar.close()
    return results


def add_offline_args(group) -> None:
    group.add_argument("--vllm-offline", metavar="MODEL_PATH", default=None,
                       help="generate with vllm.LLM on this machine's GPU instead of an endpoint")
    group.add_argument("--hf-offline", metavar="MODEL_PATH", default=None,
                       help="generate with transformers on this machine (CPU or GPU) instead of an endpoint")
    group.add_argument("--batch-size", type=int, default=8, metavar="N", help="--hf-offline batch size (default 8)")
    group.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F",
                       help="--vllm-offline: share of GPU memory vLLM may take (default 0.9; lower it to share the GPU)")
    group.add_argument("--kv-cache-gb", type=float, default=None, metavar="GB",
                       help="--vllm-offline: fixed KV-cache size instead of vLLM's memory profiling (needed when "
                            "other processes allocate GPU memory while vLLM starts)")
    group.add_argument("--enforce-eager", action="store_true",
                       help="--vllm-offline: no CUDA graphs / compilation (faster start, slower decoding)")



def check_backend(args, what: str) -> None:
    """Exactly one of ``--base-url/--model``, ``--vllm-offline``, ``--hf-offline``."""
    chosen = [name for name, on in (("--base-url/--model", bool(args.base_url or args.model)),
                                    ("--vllm-offline", bool(args.vllm_offline)),
                                    ("--hf-offline", bool(args.hf_offline))) if on]
    if len(chosen) > 1:
        raise InputError(f"give only one of {', '.join(chosen)}")
    if not chosen or (chosen == ["--base-url/--model"] and not (args.base_url and args.model)):
        raise InputError(f"need --base-url and --model (an OpenAI-compatible {what} endpoint), "
                         "or --vllm-offline MODEL_PATH, or --hf-offline MODEL_PATH")
    if args.vllm_offline and not 0 < args.gpu_memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    if args.vllm_offline and args.kv_cache_gb is not None and not args.kv_cache_gb > 0:
        raise InputError(f"--kv-cache-gb must be > 0, got {args.kv_cache_gb}")
    if args.hf_offline and args.batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {args.batch_size}")


def vllm_kwargs(args) -> dict:
    """``vllm.LLM`` keyword arguments from the ``--vllm-offline`` options."""
    kw = {"gpu_memory_utilization": args.gpu_memory_utilization, "enforce_eager": args.enforce_eager}
    if args.kv_cache_gb is not None:
        kw["kv_cache_memory_bytes"] = int(args.kv_cache_gb * 2**30)
    return kw


def backend_info(args) -> dict:
    """``{"endpoint", "model"}`` of the backend chosen by ``args`` (see ``check_backend``)."""
    if args.vllm_offline:
        return {"endpoint": "vllm offline", "model": args.vllm_offline}
    if args.hf_offline:
        return {"endpoint": "transformers offline", "model": args.hf_offline}
    try:
        url = chat_completions_url(args.base_url)
    except ValueError:
        url = args.base_url
    return {"endpoint": url, "model": args.model}


def backend_settings(args) -> dict:
    """What decides a backend's replies besides the prompt: a saved reply is reused only under the same."""
    kind = "vllm" if args.vllm_offline else "hf" if args.hf_offline else "endpoint"
    info = backend_info(args)
    settings = {"backend": kind, "model": info["model"], "temperature": float(args.temperature),
                "max_tokens": int(args.max_tokens)}
    if kind == "endpoint":  # two servers that both serve "judge" are not one (credentials masked: this is written)
        settings["endpoint"] = mask_url(info["endpoint"])
    return settings


def generate(args, conversations: Sequence[Sequence[dict]], *, n: int = 1, desc: str = "requests",
             progress: bool = True, seed: int = 0, cache: bool | None = None, on_result: OnResult | None = None,
             stop: StopSignals | None = None, done: int = 0,
             total: int | None = None) -> tuple[list[list[JudgeResult] | None], dict]:
    """``n`` replies per conversation from the backend chosen by ``args`` (see ``check_backend``).

    ``on_result(i, k, result)`` runs as soon as reply ``k`` of conversation ``i`` is there (endpoint:
    each reply; offline: after each batch). After ``stop`` fires no new request starts; conversations
    without all their replies are ``None`` in the result. ``cache`` (endpoint; default ``n == 1``)
    de-duplicates identical requests; leave it off when the same conversation is listed for separate samples.
    """
    if args.vllm_offline:
        res = vllm_chat(args.vllm_offline, conversations, max_tokens=args.max_tokens, temperature=args.temperature,
                        n=n, seed=seed, llm_kwargs=vllm_kwargs(args), on_result=on_result, stop=stop)
        return res, backend_info(args)
    if args.hf_offline:
        res = hf_chat(args.hf_offline, conversations, max_tokens=args.max_tokens, temperature=args.temperature, n=n,
                      seed=seed, batch_size=args.batch_size, progress=progress, desc=desc, on_result=on_result,
                      stop=stop, done=done, total=total)
        return res, backend_info(args)
    # samples of one conversation are separate requests: no cache when n > 1, so they are never de-duplicated
    client = make_client(args.base_url, args.model, api_key_env=args.api_key_env, concurrency=args.concurrency,
                         timeout=args.timeout, max_retries=args.max_retries, max_tokens=args.max_tokens,
                         temperature=args.temperature, cache=(n == 1) if cache is None else cache)

    def flat_result(j: int, res: JudgeResult) -> None:
        if on_result is not None:
            on_result(j // n, j % n, res)

    flat = run_chats(client, [c for c in conversations for _ in range(n)], desc=desc, progress=progress,
                     on_result=flat_result, stop=stop, done=done * n, total=None if total is None else total * n)
    per = [flat[i * n:(i + 1) * n] for i in range(len(conversations))]
    return [None if any(r is None for r in p) else p for p in per], {
        "endpoint": client.url, "model": args.model, "client_stats": dict(client.stats)}
