"""Shared helpers of the evaluation CLIs (``eval_judge``, ``eval_gsm8k``, ``plot_metrics``).

* reading parquet / JSONL with clear errors (missing file, unsupported type, missing column named);
* one place that sends chat requests: through ``reward_fns.judge_client.JudgeClient`` (concurrency,
  retries, cache) with a tqdm bar, or through ``vllm.LLM`` offline (guarded import); both return
  ``JudgeResult`` objects so the evaluators never care which path produced a reply;
* small numeric and report helpers (safe ratios, Markdown tables, JSON files, matplotlib on Agg).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from reward_fns.judge_client import JudgeClient, JudgeError, JudgeResult  # noqa: E402

__all__ = [
    "InputError", "MISSING", "read_rows", "get_path", "require_columns", "as_messages",
    "add_endpoint_args", "add_offline_args", "check_backend", "generate", "make_client", "run_chats", "vllm_chat",
    "hf_chat", "ratio", "fmt", "md_table",
    "write_json", "write_text", "pyplot", "cli_main",
]


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
                max_retries: int, max_tokens: int, temperature: float, cache: bool = True,
                backoff_base: float = 0.5) -> JudgeClient:
    if concurrency < 1:
        raise InputError(f"concurrency must be >= 1, got {concurrency}")
    if max_tokens < 1:
        raise InputError(f"max tokens must be >= 1, got {max_tokens}")
    try:
        return JudgeClient(
            base_url, model, api_key_env=api_key_env or None, timeout=timeout, max_retries=max_retries,
            max_concurrency=concurrency, temperature=temperature, max_tokens=max_tokens,
            cache_size=4096 if cache else 0, backoff_base=backoff_base,
        )
    except ValueError as e:
        raise InputError(str(e)) from None


def run_chats(client: JudgeClient, conversations: Sequence[Sequence[dict]], desc: str = "requests",
              progress: bool = True) -> list[JudgeResult]:
    """Send every conversation through ``client`` (concurrently, with retries); results in order."""
    from tqdm import tqdm

    bar = tqdm(total=len(conversations), desc=desc, unit="req", disable=not progress, file=sys.stderr,
               dynamic_ncols=True)
    failures = [0]

    def on_result(_i: int, res: JudgeResult) -> None:
        if not res.ok:
            failures[0] += 1
            bar.set_postfix(errors=failures[0], refresh=False)
        bar.update(1)

    try:
        return client.run_batch(list(conversations), on_result=on_result)
    finally:
        bar.close()


def vllm_chat(model_path: str, conversations: Sequence[Sequence[dict]], *, max_tokens: int, temperature: float,
              n: int = 1, seed: int = 0, llm_kwargs: Mapping | None = None) -> list[list[JudgeResult]]:
    """Offline generation with ``vllm.LLM.chat`` (GPU machine): ``n`` results per conversation."""
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
    llm = LLM(model=model_path, seed=seed, **dict(llm_kwargs or {}))
    params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    start = time.monotonic()
    outputs = llm.chat([list(c) for c in conversations], params, use_tqdm=True)
    elapsed = time.monotonic() - start
    results = []
    for out in outputs:
        per = []
        for comp in out.outputs:
            per.append(JudgeResult(comp.text, None, attempts=1, latency_s=elapsed / max(1, len(outputs)),
                                   finish_reason=getattr(comp, "finish_reason", None)))
        while len(per) < n:  # defensive: never fewer than asked
            per.append(JudgeResult(None, JudgeError("bad_response", "vLLM returned fewer completions than n")))
        results.append(per)
    return results


def hf_chat(model_path: str, conversations: Sequence[Sequence[dict]], *, max_tokens: int, temperature: float,
            n: int = 1, seed: int = 0, batch_size: int = 8, device: str | None = None, progress: bool = True,
            desc: str = "generate") -> list[list[JudgeResult]]:
    """Offline generation with transformers (CPU or GPU): the model's chat template, left-padded batches
    of similar length, greedy at temperature 0. ``n`` results per conversation."""
    if not os.path.isdir(model_path):
        raise InputError(f"--hf-offline: model folder not found: {model_path}")
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
    results: list[list[JudgeResult]] = [[] for _ in ids]
    bar = tqdm(total=len(ids), desc=desc, unit="conv", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    for b in range(0, len(order), max(1, batch_size)):
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
            for k in range(n):
                toks = new[row * n + k]
                stop = next((j for j, t in enumerate(toks) if t in eos), None)
                finish = "stop" if stop is not None else "length"
                text = tok.decode(toks if stop is None else toks[:stop], skip_special_tokens=True)
                results[i].append(JudgeResult(text, None, attempts=1, latency_s=elapsed / len(chunk), finish_reason=finish))
        bar.update(len(chunk))
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


def generate(args, conversations: Sequence[Sequence[dict]], *, n: int = 1, desc: str = "requests",
             progress: bool = True, seed: int = 0) -> tuple[list[list[JudgeResult]], dict]:
    """``n`` replies per conversation from the backend chosen by ``args`` (see ``check_backend``)."""
    if args.vllm_offline:
        res = vllm_chat(args.vllm_offline, conversations, max_tokens=args.max_tokens, temperature=args.temperature,
                        n=n, seed=seed, llm_kwargs=vllm_kwargs(args))
        return res, {"endpoint": "vllm offline", "model": args.vllm_offline}
    if args.hf_offline:
        res = hf_chat(args.hf_offline, conversations, max_tokens=args.max_tokens, temperature=args.temperature, n=n,
                      seed=seed, batch_size=args.batch_size, progress=progress, desc=desc)
        return res, {"endpoint": "transformers offline", "model": args.hf_offline}
    # samples of one conversation are separate requests: no cache when n > 1, so they are never de-duplicated
    client = make_client(args.base_url, args.model, api_key_env=args.api_key_env, concurrency=args.concurrency,
                         timeout=args.timeout, max_retries=args.max_retries, max_tokens=args.max_tokens,
                         temperature=args.temperature, cache=n == 1)
    flat = run_chats(client, [c for c in conversations for _ in range(n)], desc=desc, progress=progress)
    return [flat[i * n:(i + 1) * n] for i in range(len(conversations))], {
        "endpoint": client.url, "model": args.model, "client_stats": dict(client.stats)}


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


def write_json(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, default=str)
        f.write("\n")


def write_text(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def write_jsonl(path: str, rows: Sequence[Mapping]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (works without a display)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def save_fig(fig, path: str, dpi: int | None = None) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def cli_main(run: Callable[[list[str] | None], Any], argv: list[str] | None = None) -> int:
    """Run ``run(argv)``; InputError -> ``error: ...`` on stderr and exit status 2."""
    try:
        run(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
