"""Replies generated on this machine instead of an endpoint: ``vllm_chat`` (``vllm.LLM.chat`` on the GPU,
``--vllm-offline MODEL_PATH``) and ``hf_chat`` (transformers on CPU or GPU, ``--hf-offline MODEL_PATH``), each
``n`` ``JudgeResult`` objects per conversation, handed over batch by batch (their flags and settings:
``scripts.eval.backends``). No command of its own; used by ``scripts.eval.backends.generate``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from reward_fns.judge_client import JudgeResult
from reward_fns.judge_errors import JudgeError
from scripts.eval.cli import InputError, progress_bar

if TYPE_CHECKING:
    from scripts.eval.predictions import StopSignals


#: conversations per ``vllm.LLM.chat`` call: replies are saved (and a stop request honoured) between calls
VLLM_CHUNK = 1024


OnResult = Callable[[int, int, JudgeResult], None]


def vllm_chat(
    backend, conversations: Sequence[Sequence[dict]], *, n: int, seed: int, on_result: OnResult, stop
) -> list[list[JudgeResult] | None]:
    """Offline generation with ``vllm.LLM.chat`` (GPU machine) from the ``--vllm-offline`` model and options of
    ``backend`` (a ``scripts.eval.backends.Backend``): ``n`` results per conversation, in chunks of ``VLLM_CHUNK``."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as e:
        raise InputError(
            f"--vllm-offline needs the 'vllm' package, which is not importable here ({e}). Install the GPU "
            "profile on a CUDA machine (bash scripts/setup_env.sh gpu), use --hf-offline MODEL_PATH "
            "(transformers, CPU or GPU), or serve the model (vllm serve MODEL_PATH) and use --base-url/--model."
        ) from None
    if not os.path.exists(backend.vllm_offline):
        raise InputError(f"--vllm-offline: model path not found: {backend.vllm_offline}")
    llm = None

    def chat(chunk: list[int]) -> list[list[JudgeResult]]:
        nonlocal llm
        llm = llm or LLM(model=backend.vllm_offline, seed=seed, **backend.vllm_kwargs())
        params = SamplingParams(n=n, temperature=backend.temperature, max_tokens=backend.max_tokens, seed=seed)
        start = time.monotonic()
        outputs = llm.chat([list(conversations[i]) for i in chunk], params, use_tqdm=True)
        latency = (time.monotonic() - start) / max(1, len(outputs))
        short = JudgeResult(None, JudgeError("bad_response", "vLLM returned fewer completions than n"))
        return [
            [JudgeResult(c.text, attempts=1, latency_s=latency, finish_reason=c.finish_reason) for c in out.outputs]
            + [short] * (n - len(out.outputs))  # never fewer than asked
            for out in outputs
        ]

    return _in_batches(list(range(len(conversations))), VLLM_CHUNK, chat, on_result, stop)


def hf_chat(
    backend,
    conversations: Sequence[Sequence[dict]],
    *,
    n: int,
    seed: int,
    on_result: OnResult,
    stop,
    desc: str,
    progress: bool,
    done: int,
    total: int | None,
) -> list[list[JudgeResult] | None]:
    """Offline generation with transformers (CPU or GPU) from the ``--hf-offline`` model of ``backend``: the model's
    chat template, left-padded batches of similar length (``--batch-size``), greedy at temperature 0. ``n`` results
    per conversation."""
    if not os.path.isdir(backend.hf_offline):
        raise InputError(f"--hf-offline: model folder not found: {backend.hf_offline}")
    if not conversations or (stop is not None and stop.stopped):
        return [None] * len(conversations)
    hf = _HFModel(backend.hf_offline, seed)
    ids = [hf.tokenize(c) for c in conversations]

    def chat(chunk: list[int]) -> list[list[JudgeResult]]:
        return hf.generate([ids[i] for i in chunk], backend.max_tokens, backend.temperature, n)

    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    bar = progress_bar(desc, "conv", progress, done, done + len(ids) if total is None else total)
    return _in_batches(order, backend.batch_size, chat, on_result, stop, bar)


def _in_batches(
    order: list[int], size: int, chat, on_result: OnResult, stop: StopSignals | None, bar=None
) -> list[list[JudgeResult] | None]:
    """``chat(batch)`` of each ``size`` conversations of ``order``; after each batch ``on_result(i, k, result)`` runs
    for its replies and a stop request (``stop``) ends the loop (unfinished conversations stay ``None``)."""
    results: list[list[JudgeResult] | None] = [None] * len(order)
    try:
        for b in range(0, len(order), size):
            if stop is not None and stop.stopped:
                break
            chunk = order[b : b + size]
            for i, per in zip(chunk, chat(chunk)):
                results[i] = per
                for k, res in enumerate(per):
                    on_result(i, k, res)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return results


class _HFModel:
    """A transformers causal LM and its tokenizer (``hf_chat``), on the GPU when there is one, seeded."""

    def __init__(self, model_path: str, seed: int):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.float32 if self.device == "cpu" else torch.bfloat16
        self.tok = AutoTokenizer.from_pretrained(model_path, padding_side="left")
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(self.device).eval()
        torch.manual_seed(seed)
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        self.eos = {self.tok.eos_token_id} | set(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos])
        self.eos.discard(None)

    def tokenize(self, conversation: Sequence[dict]) -> list[int]:
        return self.tok.apply_chat_template(
            list(conversation), add_generation_prompt=True, tokenize=True, return_dict=False
        )

    def generate(self, batch: list[list[int]], max_tokens: int, temperature: float, n: int) -> list[list[JudgeResult]]:
        """``n`` replies to each prompt of ``batch`` (token ids), left-padded to one width."""
        import torch

        enc = self.tok.pad({"input_ids": batch}, return_tensors="pt").to(self.device)
        kw = {"max_new_tokens": max_tokens, "num_return_sequences": n, "pad_token_id": self.tok.pad_token_id}
        greedy = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        kw |= {"do_sample": True, "temperature": temperature} if temperature > 0 else greedy
        start = time.monotonic()
        with torch.no_grad():
            out = self.model.generate(**enc, **kw)
        latency = (time.monotonic() - start) / len(batch)
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        return [[self._result(new[row * n + k], latency) for k in range(n)] for row in range(len(batch))]

    def _result(self, toks: list[int], latency: float) -> JudgeResult:
        """One reply: its tokens up to the first end-of-sequence token (``finish_reason`` stop), else all (length)."""
        stop_at = next((j for j, t in enumerate(toks) if t in self.eos), None)
        text = self.tok.decode(toks if stop_at is None else toks[:stop_at], skip_special_tokens=True)
        finish = "stop" if stop_at is not None else "length"
        return JudgeResult(text, None, attempts=1, latency_s=latency, finish_reason=finish)
