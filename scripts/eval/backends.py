"""Where the evaluators' replies come from: ``Backend`` (the generation backend the command line names, parsed once:
an OpenAI-compatible endpoint, ``scripts.eval.endpoint``; ``--vllm-offline`` / ``--hf-offline``,
``scripts.eval.offline``) and ``generate``, which asks it and returns ``JudgeResult`` objects
(``reward_fns.judge_client``) either way, so an evaluator never cares which one answered. No command of its own; used
by ``python -m scripts.eval.judge`` and ``python -m scripts.eval.gsm8k`` (``--help`` lists the flags,
``add_backend_args``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reward_fns.judge_client import JudgeResult, chat_completions_url
from reward_fns.redact import mask_url
from scripts.eval.cli import InputError
from scripts.eval.endpoint import add_endpoint_args, make_client, run_chats
from scripts.eval.offline import OnResult, hf_chat, vllm_chat

if TYPE_CHECKING:
    from scripts.eval.predictions import StopSignals


def add_backend_args(group, what: str) -> None:
    """The flags of a ``Backend``: the endpoint's (``--base-url``, ``--model``, ...) and the offline ones."""
    add_endpoint_args(group, what=what)
    vllm_help = "generate with vllm.LLM on this machine's GPU instead of an endpoint"
    group.add_argument("--vllm-offline", metavar="MODEL_PATH", default=None, help=vllm_help)
    hf_help = "generate with transformers on this machine (CPU or GPU) instead of an endpoint"
    group.add_argument("--hf-offline", metavar="MODEL_PATH", default=None, help=hf_help)
    group.add_argument("--batch-size", type=int, default=8, metavar="N", help="--hf-offline batch size (default 8)")
    mem_help = "--vllm-offline: share of GPU memory vLLM may take (default 0.9; lower it to share the GPU)"
    group.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F", help=mem_help)
    kv_help = "--vllm-offline: fixed KV-cache size instead of vLLM's memory profiling (needed when other processes "
    kv_help += "allocate GPU memory while vLLM starts)"
    group.add_argument("--kv-cache-gb", type=float, default=None, metavar="GB", help=kv_help)
    eager_help = "--vllm-offline: no CUDA graphs / compilation (faster start, slower decoding)"
    group.add_argument("--enforce-eager", action="store_true", help=eager_help)


@dataclass(frozen=True)
class Backend:
    """The generation backend and its settings: ``cli.from_args(Backend, args)`` of the flags ``add_backend_args``
    sets (their defaults are there; None where the command line has no such flag: the GSM8K judge's offline ones)."""

    base_url: str | None
    model: str | None
    api_key_env: str | None
    concurrency: int
    timeout: float
    max_retries: int
    max_tokens: int
    temperature: float
    vllm_offline: str | None = None
    hf_offline: str | None = None
    batch_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_gb: float | None = None
    enforce_eager: bool | None = None

    @property
    def kind(self) -> str:
        return "vllm" if self.vllm_offline else "hf" if self.hf_offline else "endpoint"

    def check(self, what: str) -> None:
        """Exactly one of ``--base-url/--model``, ``--vllm-offline``, ``--hf-offline``, and its options in range."""
        flags = {"--base-url/--model": self.base_url or self.model, "--vllm-offline": self.vllm_offline}
        chosen = [name for name, on in (flags | {"--hf-offline": self.hf_offline}).items() if on]
        if len(chosen) > 1:
            raise InputError(f"give only one of {', '.join(chosen)}")
        if not chosen or (chosen == ["--base-url/--model"] and not (self.base_url and self.model)):
            raise InputError(
                f"need --base-url and --model (an OpenAI-compatible {what} endpoint), "
                "or --vllm-offline MODEL_PATH, or --hf-offline MODEL_PATH"
            )
        if self.vllm_offline and not 0 < self.gpu_memory_utilization <= 1:
            raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.vllm_offline and self.kv_cache_gb is not None and not self.kv_cache_gb > 0:
            raise InputError(f"--kv-cache-gb must be > 0, got {self.kv_cache_gb}")
        if self.hf_offline and self.batch_size < 1:
            raise InputError(f"--batch-size must be >= 1, got {self.batch_size}")

    def info(self) -> dict:
        """``{"endpoint", "model"}`` of the backend, as the reports name it."""
        if self.vllm_offline:
            return {"endpoint": "vllm offline", "model": self.vllm_offline}
        if self.hf_offline:
            return {"endpoint": "transformers offline", "model": self.hf_offline}
        try:
            url = chat_completions_url(self.base_url)
        except ValueError:
            url = self.base_url
        return {"endpoint": url, "model": self.model}

    def described(self, info: dict | None) -> dict:
        """The backend as a report names it: ``generate``'s ``info`` (``self.info()`` when nothing was asked) and
        the sampling."""
        return {**(info or self.info()), "temperature": self.temperature, "max_tokens": self.max_tokens}

    def settings(self) -> dict:
        """What decides a backend's replies besides the prompt: a saved reply is reused only under the same."""
        settings = {
            "backend": self.kind,
            "model": self.info()["model"],
            "temperature": float(self.temperature),
            "max_tokens": int(self.max_tokens),
        }
        if self.kind == "endpoint":  # two servers that both serve "judge" are not one (credentials masked: written)
            settings["endpoint"] = mask_url(self.info()["endpoint"])
        return settings

    def vllm_kwargs(self) -> dict:
        """``vllm.LLM`` keyword arguments from the ``--vllm-offline`` options."""
        kw = {"gpu_memory_utilization": self.gpu_memory_utilization, "enforce_eager": self.enforce_eager}
        if self.kv_cache_gb is not None:
            kw["kv_cache_memory_bytes"] = int(self.kv_cache_gb * 2**30)
        return kw


def generate(
    backend: Backend,
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
    """``n`` replies per conversation from ``backend``, and its ``info`` (an endpoint's with ``client_stats``).

    ``on_result(i, k, result)`` runs as soon as reply ``k`` of conversation ``i`` is there (endpoint:
    each reply; offline: after each batch). After ``stop`` fires no new request starts; conversations
    without all their replies are ``None`` in the result. ``cache`` (endpoint; default ``n == 1``)
    de-duplicates identical requests; leave it off when the same conversation is listed for separate samples.
    """
    on_result = on_result or (lambda i, k, res: None)
    if backend.vllm_offline:
        return vllm_chat(backend, conversations, n=n, seed=seed, on_result=on_result, stop=stop), backend.info()
    bar = dict(desc=desc, progress=progress, stop=stop)
    if backend.hf_offline:
        res = hf_chat(backend, conversations, n=n, seed=seed, on_result=on_result, done=done, total=total, **bar)
        return res, backend.info()
    # each of the n samples of a conversation is a request of its own: no cache when n > 1, so none is de-duplicated
    client = make_client(backend, cache=(n == 1) if cache is None else cache)
    asks = [c for c in conversations for _ in range(n)]
    counts = dict(done=done * n, total=None if total is None else total * n)  # the bar counts requests
    flat = run_chats(client, asks, **bar, on_result=lambda j, res: on_result(j // n, j % n, res), **counts)
    per = [flat[i * n : (i + 1) * n] for i in range(len(conversations))]
    return [None if None in p else p for p in per], {**backend.info(), "client_stats": dict(client.stats)}
