"""Where the evaluators' replies come from: ``generate`` asks the backend the arguments name (an OpenAI-compatible
endpoint, ``scripts.eval.endpoint``; ``--vllm-offline`` / ``--hf-offline``, ``scripts.eval.offline``) and returns
``JudgeResult`` objects (``reward_fns.judge_client``) either way, so an evaluator never cares which one answered.
``check_backend`` wants exactly one backend; ``backend_info`` / ``backend_settings`` describe it for the report and
the resume log. No command of its own; used by ``python -m scripts.eval.judge`` and ``python -m scripts.eval.gsm8k``
(``--help`` lists the flags).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from reward_fns.judge_client import JudgeResult, chat_completions_url
from reward_fns.redact import mask_url
from scripts.eval.cli import InputError
from scripts.eval.endpoint import make_client, run_chats
from scripts.eval.offline import OnResult, hf_chat, vllm_chat, vllm_kwargs

if TYPE_CHECKING:
    from scripts.eval.predictions import StopSignals


def check_backend(args, what: str) -> None:
    """Exactly one of ``--base-url/--model``, ``--vllm-offline``, ``--hf-offline``."""
    chosen = [
        name
        for name, on in (
            ("--base-url/--model", bool(args.base_url or args.model)),
            ("--vllm-offline", bool(args.vllm_offline)),
            ("--hf-offline", bool(args.hf_offline)),
        )
        if on
    ]
    if len(chosen) > 1:
        raise InputError(f"give only one of {', '.join(chosen)}")
    if not chosen or (chosen == ["--base-url/--model"] and not (args.base_url and args.model)):
        raise InputError(
            f"need --base-url and --model (an OpenAI-compatible {what} endpoint), "
            "or --vllm-offline MODEL_PATH, or --hf-offline MODEL_PATH"
        )
    if args.vllm_offline and not 0 < args.gpu_memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    if args.vllm_offline and args.kv_cache_gb is not None and not args.kv_cache_gb > 0:
        raise InputError(f"--kv-cache-gb must be > 0, got {args.kv_cache_gb}")
    if args.hf_offline and args.batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {args.batch_size}")


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
    settings = {
        "backend": kind,
        "model": info["model"],
        "temperature": float(args.temperature),
        "max_tokens": int(args.max_tokens),
    }
    if kind == "endpoint":  # two servers that both serve "judge" are not one (credentials masked: this is written)
        settings["endpoint"] = mask_url(info["endpoint"])
    return settings


def generate(
    args,
    conversations: Sequence[Sequence[dict]],
    *,
    n: int = 1,
    desc: str = "requests",
    progress: bool = True,
    seed: int = 0,
    cache: bool | None = None,
    on_result: OnResult | None = None,
    stop: StopSignals | None = None,
    done: int = 0,
    total: int | None = None,
) -> tuple[list[list[JudgeResult] | None], dict]:
    """``n`` replies per conversation from the backend chosen by ``args`` (see ``check_backend``).

    ``on_result(i, k, result)`` runs as soon as reply ``k`` of conversation ``i`` is there (endpoint:
    each reply; offline: after each batch). After ``stop`` fires no new request starts; conversations
    without all their replies are ``None`` in the result. ``cache`` (endpoint; default ``n == 1``)
    de-duplicates identical requests; leave it off when the same conversation is listed for separate samples.
    """
    if args.vllm_offline:
        res = vllm_chat(
            args.vllm_offline,
            conversations,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            n=n,
            seed=seed,
            llm_kwargs=vllm_kwargs(args),
            on_result=on_result,
            stop=stop,
        )
        return res, backend_info(args)
    if args.hf_offline:
        res = hf_chat(
            args.hf_offline,
            conversations,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            n=n,
            seed=seed,
            batch_size=args.batch_size,
            progress=progress,
            desc=desc,
            on_result=on_result,
            stop=stop,
            done=done,
            total=total,
        )
        return res, backend_info(args)
    # samples of one conversation are separate requests: no cache when n > 1, so they are never de-duplicated
    client = make_client(
        args.base_url,
        args.model,
        api_key_env=args.api_key_env,
        concurrency=args.concurrency,
        timeout=args.timeout,
        max_retries=args.max_retries,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        cache=(n == 1) if cache is None else cache,
    )

    def flat_result(j: int, res: JudgeResult) -> None:
        if on_result is not None:
            on_result(j // n, j % n, res)

    flat = run_chats(
        client,
        [c for c in conversations for _ in range(n)],
        desc=desc,
        progress=progress,
        on_result=flat_result,
        stop=stop,
        done=done * n,
        total=None if total is None else total * n,
    )
    per = [flat[i * n : (i + 1) * n] for i in range(len(conversations))]
    return [None if any(r is None for r in p) else p for p in per], {
        "endpoint": client.url,
        "model": args.model,
        "client_stats": dict(client.stats),
    }
