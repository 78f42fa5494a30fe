"""Shared helpers of the evaluation and report CLIs (``scripts.eval.judge``, ``scripts.eval.gsm8k``,
``scripts.report.*``).

* reading parquet / JSONL with clear errors (missing file, unsupported type, missing column named);
* one place that sends chat requests: through ``reward_fns.judge_client.JudgeClient`` (concurrency,
  retries, cache) with a tqdm bar, or through ``vllm.LLM`` offline (guarded import); both return
  ``JudgeResult`` objects so the evaluators never care which path produced a reply;
* results that survive the run: ``prepare_out_dir`` (is ``--out`` writable? checked before the first
  request), ``PredictionLog`` (``--out/predictions.jsonl``: every reply appended and flushed as it
  arrives; a rerun with the same ``--out`` reuses the rows already answered), ``StopSignals``
  (SIGINT/SIGTERM stop the request loops so the evaluator can write a partial report), atomic file
  writes (temporary file + ``os.replace``: a report is never left half written);
* small numeric and report helpers (safe ratios, Markdown tables, JSON files, matplotlib on Agg).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reward_fns.judge_client import JudgeClient, JudgeError, JudgeResult, chat_completions_url

__all__ = [
    "InputError", "MISSING", "read_rows", "get_path", "require_columns", "as_messages",
    "add_endpoint_args", "add_offline_args", "check_backend", "backend_info", "generate", "make_client", "run_chats",
    "vllm_chat", "hf_chat", "ratio", "fmt", "md_table", "prepare_out_dir", "request_ids", "PredictionLog",
    "StopSignals", "write_json", "write_text", "write_jsonl", "pyplot", "cli_main",
]

#: conversations per ``vllm.LLM.chat`` call: replies are saved (and a stop request honoured) between calls
VLLM_CHUNK = 1024


class InputError(Exception):
    """Bad input or arguments: the CLI prints ``error: <message>`` and exits with status 2."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


# ----------------------------------------------------------------------------- reading
def _json_lines(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {lineno}: invalid JSON ({e.msg}, column {e.colno})") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}: line {lineno}: expected a JSON object, got {type(obj).__name__}")
            rows.append(obj)
    return rows


def read_rows(path: str, limit: int | None = None) -> list[dict]:
    """Rows of a ``.parquet`` or ``.jsonl[.gz]`` file as plain Python dicts (first ``limit`` only)."""
    if not path or not os.path.exists(path):
        raise InputError(f"input file not found: {path}")
    if os.path.isdir(path):
        raise InputError(f"{path} is a folder; give a .parquet or .jsonl file")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # noqa: BLE001 - any arrow error means an unreadable file
            raise InputError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
        rows: list[dict] = []
        for batch in pf.iter_batches(batch_size=4096):
            rows.extend(batch.to_pylist())
            if limit is not None and len(rows) >= limit:
                break
    elif path.endswith((".jsonl", ".jsonl.gz")):
        rows = _json_lines(path)
    else:
        raise InputError(f"{path}: unsupported file type (use .parquet or .jsonl / .jsonl.gz)")
    if limit is not None:
        if limit < 1:
            raise InputError(f"--limit must be >= 1, got {limit}")
        rows = rows[:limit]
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def get_path(row: Mapping, dotted: str, default: Any = MISSING) -> Any:
    """``row["a"]["b"]`` for ``"a.b"``; ``default`` when any level is absent or not a mapping."""
    cur: Any = row
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return default
        cur = cur[part]
    return cur


def require_columns(rows: Sequence[Mapping], columns: Sequence[str], path: str) -> None:
    """InputError naming the first missing (dotted) column and the columns the file has."""
    first = rows[0]
    for col in columns:
        missing_at = next((i for i, r in enumerate(rows) if get_path(r, col) is MISSING), None)
        if missing_at is not None:
            found = sorted(first.keys())
            where = "" if missing_at == 0 else f" (row {missing_at + 1})"
            raise InputError(f"{path}: missing column '{col}'{where}; the file has columns {found}")


def as_messages(value: Any, where: str) -> list[dict]:
    """Chat messages ``[{"role", "content"}]`` from a parquet/JSON value, or InputError."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: expected a non-empty list of chat messages, got {type(value).__name__}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise InputError(f"{where}[{i}]: expected a message with string 'role' and 'content'")
        out.append({"role": m["role"], "content": m["content"]})
    return out


# ----------------------------------------------------------------------------- endpoints
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
            cache_size=4096 if cache else 0,
        )
    except ValueError as e:
        raise InputError(str(e)) from None


OnResult = Callable[[int, int, JudgeResult], None]


def run_chats(client: JudgeClient, conversations: Sequence[Sequence[dict]], desc: str = "requests",
              progress: bool = True, *, on_result: Callable[[int, JudgeResult], None] | None = None,
              stop: "StopSignals | None" = None, done: int = 0, total: int | None = None) -> list[JudgeResult | None]:
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
            if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError):
                raise o

    try:
        asyncio.run(main())
    finally:
        bar.close()
    return results


def vllm_chat(model_path: str, conversations: Sequence[Sequence[dict]], *, max_tokens: int, temperature: float,
              n: int = 1, seed: int = 0, llm_kwargs: Mapping | None = None, on_result: OnResult | None = None,
              stop: "StopSignals | None" = None) -> list[list[JudgeResult] | None]:
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
            n: int = 1, seed: int = 0, batch_size: int = 8, device: str | None = None, progress: bool = True,
            desc: str = "generate", on_result: OnResult | None = None, stop: "StopSignals | None" = None,
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

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
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


def add_output_args(ap, *, default_out: str, reused: str):
    """The output group both evaluators start with (--out, --no-resume); returned for their own options."""
    g = ap.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", default=None, help=f"report folder (default {default_out})")
    g.add_argument("--no-resume", action="store_true",
                   help="request everything again, replacing the predictions.jsonl of an earlier run in --out "
                        f"(default: {reused} already there with the same settings are reused)")
    return g


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
    return {"backend": kind, "model": backend_info(args)["model"], "temperature": float(args.temperature),
            "max_tokens": int(args.max_tokens)}


def generate(args, conversations: Sequence[Sequence[dict]], *, n: int = 1, desc: str = "requests",
             progress: bool = True, seed: int = 0, cache: bool | None = None, on_result: OnResult | None = None,
             stop: "StopSignals | None" = None, done: int = 0,
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


# ----------------------------------------------------------------------------- results that survive the run
def prepare_out_dir(path: str) -> str:
    """Create ``path`` and prove it writable (a probe file is written and removed), or InputError.

    Called before the first request, so an unwritable ``--out`` costs no work."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"--out {path}: exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out {path}: cannot create the folder ({e.strerror or e})") from None
    probe = os.path.join(path, f".write-probe-{os.getpid()}")
    try:
        with open(probe, "w", encoding="utf-8") as f:
            f.write("probe\n")
        os.remove(probe)
    except OSError as e:
        raise InputError(f"--out {path}: not writable ({e.strerror or e})") from None
    return path


def request_ids(conversations: Sequence[Sequence[Mapping]]) -> list[str]:
    """A stable id per row from its request content (the chat messages): the same prompt gets the same
    id in every run, whatever the row order or ``--limit``; the k-th repeat of a prompt gets ``-k``."""
    seen: dict[str, int] = {}
    out = []
    for conv in conversations:
        blob = json.dumps([{"role": m["role"], "content": m["content"]} for m in conv], ensure_ascii=False)
        h = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
        seen[h] = seen.get(h, 0) + 1
        out.append(h if seen[h] == 1 else f"{h}-{seen[h]}")
    return out


def _canon(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


class PredictionLog:
    """``DIR/predictions.jsonl``: one JSON object per finished row, appended and flushed as it arrives.

    Every record has ``kind`` (what produced it) and ``row_id`` (``request_ids``). ``DIR/run.json``
    names the tool and the settings of each kind (``backend_settings``). ``load`` returns the records
    of an earlier run with the same ``DIR`` (last record of a row wins; a cut-off last line is
    skipped), or InputError when that run used other settings; ``begin`` rewrites the file with the
    records kept and opens it for appending; ``finalize`` rewrites it atomically in row order.
    """

    def __init__(self, out_dir: str, tool: str, settings: Mapping[str, Any], resume: bool = True,
                 name: str = "predictions.jsonl"):
        self.path = os.path.join(out_dir, name)
        self.meta_path = os.path.join(out_dir, "run.json")
        self.tool = tool
        self.settings = _canon(dict(settings))
        self.resume = resume
        self.skipped_lines = 0
        self._f = None
        self._lock = threading.Lock()

    def load(self) -> dict[tuple[str, str], dict]:
        if not self.resume or not os.path.exists(self.path):
            return {}
        recs: dict[tuple[str, str], dict] = {}
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    self.skipped_lines += 1  # a line cut off when the process was killed
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("row_id"), str):
                    self.skipped_lines += 1  # a record without a row id (an older format): nothing to reuse
                    continue
                recs[(str(rec.get("kind", "")), rec["row_id"])] = rec
        if not recs:
            return {}
        try:
            with open(self.meta_path, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            raise InputError(f"{self.path} has {len(recs)} saved predictions but {self.meta_path} (their settings) "
                             "is missing or unreadable; use another --out, or --no-resume to replace them") from None
        if meta.get("tool") != self.tool:
            raise InputError(f"{self.path} was written by {meta.get('tool')}, not {self.tool}; use another --out")
        old = meta.get("settings") or {}
        for kind in sorted({k for k, _ in recs}):
            if kind not in self.settings or self.settings[kind] is None:
                continue  # not part of this run: its records are dropped
            if _canon(old.get(kind)) != self.settings[kind]:
                diff = ", ".join(f"{k}: {(old.get(kind) or {}).get(k)!r} -> {v!r}"
                                 for k, v in self.settings[kind].items() if (old.get(kind) or {}).get(k) != v)
                raise InputError(f"{self.path} holds {kind} predictions made with other settings "
                                 f"({diff or old.get(kind)}); use another --out, or --no-resume to replace them")
        return {k: v for k, v in recs.items() if self.settings.get(k[0]) is not None}

    def begin(self, kept: Sequence[Mapping]) -> None:
        """Rewrite the file with ``kept`` (atomically), write ``run.json`` and open the file for appending."""
        write_json(self.meta_path, {"tool": self.tool, "settings": self.settings})
        write_jsonl(self.path, kept)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, rec: Mapping) -> None:
        line = json.dumps(rec, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def finalize(self, records: Sequence[Mapping]) -> None:
        self.close()
        write_jsonl(self.path, records)


class StopSignals:
    """``with StopSignals() as stop:`` SIGINT / SIGTERM ask the request loops to stop.

    The first signal sets ``stop.signum`` and runs the ``on_stop`` callbacks (a loop stops sending
    requests and the evaluator writes the reports of what finished); a second one raises
    ``KeyboardInterrupt`` (stop now, e.g. inside a long offline batch). Leaving the block restores the
    previous handlers. Outside the main thread it does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, what: str = "requests"):
        self.what = what
        self.signum: int | None = None
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self._old: dict[int, Any] = {}

    @property
    def stopped(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + int(self.signum or 0)

    def on_stop(self, fn: Callable[[], None]) -> int:
        self._next += 1
        self._callbacks[self._next] = fn
        if self.stopped:
            fn()
        return self._next

    def remove(self, token: int) -> None:
        self._callbacks.pop(token, None)

    def _handle(self, signum, _frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: stopping, no new {self.what}; writing the reports of what finished "
              "(send it again to stop at once)", file=sys.stderr, flush=True)
        for fn in list(self._callbacks.values()):
            fn()

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
        self._old.clear()


# ----------------------------------------------------------------------------- numbers and reports
def ratio(num: float, den: float) -> float | None:
    """``num / den`` or ``None`` when ``den`` is 0 (JSON ``null``, Markdown ``n/a``)."""
    return None if not den else num / den


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        return f"{x:.{digits}f}"
    return str(x)


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c) for c in r) + " |")
    return "\n".join(lines)


def _atomic(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` through a temporary file in the same folder and ``os.replace``: readers see the
    old file or the new one, never a half-written one (also when the process dies mid-write)."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def write_json(path: str, obj: Any) -> None:
    def write(f):
        json.dump(obj, f, indent=2, ensure_ascii=False, default=str)
        f.write("\n")

    _atomic(path, write)


def write_text(path: str, text: str) -> None:
    _atomic(path, lambda f: f.write(text if text.endswith("\n") else text + "\n"))


def write_jsonl(path: str, rows: Sequence[Mapping]) -> None:
    def write(f):
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")

    _atomic(path, write)


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (works without a display)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def save_fig(fig, path: str, dpi: int | None = None) -> str:
    fig.tight_layout()
    fmt_ = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    _atomic(path, lambda f: fig.savefig(f, dpi=dpi, format=fmt_), binary=True)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def cli_main(run: Callable[[list[str] | None], Any], argv: list[str] | None = None) -> int:
    """Run ``run(argv)``; InputError -> ``error: ...`` on stderr and exit status 2. A ``run`` that returns
    ``(report, status, reason)`` (the evaluators) exits with ``status``, printing ``reason`` when set."""
    try:
        out = run(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if isinstance(out, tuple) and len(out) == 3:
        _report, status, reason = out
        if reason:
            print(f"error: {reason}", file=sys.stderr)
        return status
    return 0
