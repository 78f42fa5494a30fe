"""A randomly initialised model at a published architecture, written as a Hugging Face folder (no download).

The judge-cost benchmark (``scripts/lab/bench/shapes.sh``) times a GRPO step at "anchor" shapes -- a
SmolLM2-360M policy rewarded by a SmolLM2-1.7B judge -- where only the shapes matter, not what the
weights know. This writes a ``LlamaForCausalLM`` with one of the public SmolLM2 configs (``ARCHS``,
from HuggingFaceTB/SmolLM2-360M and SmolLM2-1.7B ``config.json``) and random weights (the model's own
initialisation after ``torch.manual_seed``), built directly on ``--device`` in ``--dtype``. The
tokenizer files and ``generation_config.json`` are copied from ``--tokenizer-from`` (the offline
SmolLM2-135M-Instruct folder of ``python -m data_prep.model``: the whole SmolLM2 family shares its
49,152-token tokenizer), and bos/eos/pad token ids are taken from that folder's ``config.json``, so
generation stops on the same token as with the source model.

The folder is written atomically (a temporary folder next to ``--out``, renamed when complete). When
``--out`` already holds a model with the same architecture, token ids and dtype, nothing is done (exit
0); a different model there is an error (exit 2), it is never overwritten. The last line printed is
the folder, so ``JUDGE=$(python -m scripts.lab.bench.random_model ... | tail -n 1)`` works.

    python -m scripts.lab.bench.random_model --arch smollm2-360m \\
        --tokenizer-from "$(python -m data_prep.model | tail -n 1)" --out models/random-smollm2-360m
    python -m scripts.lab.bench.random_model --arch smollm2-1.7b --tokenizer-from DIR --out DIR2 --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping

#: The public SmolLM2 configs (config.json of HuggingFaceTB/SmolLM2-360M(-Instruct) and SmolLM2-1.7B(-Instruct)).
ARCHS: dict[str, dict] = {
    "smollm2-360m": dict(
        hidden_size=960,
        intermediate_size=2560,
        num_hidden_layers=32,
        num_attention_heads=15,
        num_key_value_heads=5,
        rope_theta=100000.0,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        vocab_size=49152,
        hidden_act="silu",
    ),
    "smollm2-1.7b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=24,
        num_attention_heads=32,
        num_key_value_heads=32,
        rope_theta=130000.0,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        vocab_size=49152,
        hidden_act="silu",
    ),
}
ARCH_KEYS = tuple(ARCHS["smollm2-360m"])
TOKEN_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")
#: Files copied from --tokenizer-from when present (tokenizer.json or vocab.json must be among them).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
DTYPES = ("bfloat16", "float16", "float32")


class RandomModelError(Exception):
    """A bad argument or an --out folder that holds another model (exit 2)."""


def arch_values(arch: str | Mapping) -> dict:
    """The architecture table entry for a name in ``ARCHS``, or a mapping with every ``ARCH_KEYS`` key (tests)."""
    if isinstance(arch, str):
        if arch not in ARCHS:
            raise RandomModelError(f"unknown --arch {arch!r}; known: {', '.join(ARCHS)}")
        return dict(ARCHS[arch])
    missing = [k for k in ARCH_KEYS if k not in arch]
    if missing:
        raise RandomModelError(f"architecture mapping lacks {missing}")
    return {k: arch[k] for k in ARCH_KEYS}


def param_count(arch: str | Mapping) -> int:
    """Parameters of the LlamaForCausalLM the entry describes (no bias, RMSNorm weights), without building it."""
    a = arch_values(arch)
    h, inter, layers = a["hidden_size"], a["intermediate_size"], a["num_hidden_layers"]
    head_dim = h // a["num_attention_heads"]
    attn = 2 * h * h + 2 * h * a["num_key_value_heads"] * head_dim  # q, o; k, v
    per_layer = attn + 3 * h * inter + 2 * h  # + gate, up, down; two norms
    embed = a["vocab_size"] * h
    return embed * (1 if a["tie_word_embeddings"] else 2) + layers * per_layer + h


def read_token_ids(tokenizer_from: str) -> dict:
    """bos/eos/pad token ids of the source model's config.json (absent ones: its generation_config.json)."""
    found: dict = {}
    for name in ("generation_config.json", "config.json"):  # config.json wins
        path = os.path.join(tokenizer_from, name)
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            found.update({k: data[k] for k in TOKEN_ID_KEYS if data.get(k) is not None})
    if "eos_token_id" not in found:
        raise RandomModelError(f"{tokenizer_from}: no eos_token_id in config.json or generation_config.json")
    return found


def config_for(arch: str | Mapping, token_ids: Mapping | None = None, dtype: str = "bfloat16"):
    """The transformers ``LlamaConfig`` of an architecture (nothing is allocated)."""
    from transformers import LlamaConfig

    a = arch_values(arch)
    if a["hidden_size"] % a["num_attention_heads"]:
        raise RandomModelError("hidden_size must be a multiple of num_attention_heads")
    cfg = LlamaConfig(
        **a,
        head_dim=a["hidden_size"] // a["num_attention_heads"],
        attention_bias=False,
        mlp_bias=False,
        initializer_range=0.02,
        use_cache=True,
        **dict(token_ids or {}),
    )
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.dtype = dtype
    return cfg


def config_arch(cfg) -> dict:
    """The ``ARCH_KEYS`` values of a loaded config (rope_theta from ``rope_parameters`` in transformers 5)."""
    out = {k: getattr(cfg, k, None) for k in ARCH_KEYS if k != "rope_theta"}
    rope = getattr(cfg, "rope_parameters", None) or {}
    out["rope_theta"] = float(rope.get("rope_theta", getattr(cfg, "rope_theta", 0.0)) or 0.0)
    return out


def wanted(arch: str | Mapping, token_ids: Mapping, dtype: str) -> dict:
    """What a folder's config.json must say for the model to count as already written."""
    return {**arch_values(arch), **{k: token_ids.get(k) for k in TOKEN_ID_KEYS}, "dtype": dtype}


def folder_holds(out: str) -> dict:
    """The same values as ``wanted`` from a folder's config.json (plain JSON: no torch import)."""
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    got = {k: cfg.get(k) for k in ARCH_KEYS + TOKEN_ID_KEYS}
    got["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
    got["dtype"] = cfg.get("dtype") or cfg.get("torch_dtype")
    return got


def existing_matches(out: str, want: dict) -> bool:
    """True when ``out`` holds a complete model with the ``want`` values; False when there is no ``out``;
    raises when it holds something else."""
    if not os.path.exists(out):
        return False
    if not os.path.exists(os.path.join(out, "config.json")):
        raise RandomModelError(f"--out {out} exists but holds no config.json; remove it or choose another --out")
    have = folder_holds(out)
    diff = {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v}
    weights = any(f.endswith(".safetensors") for f in os.listdir(out))
    if diff or not weights:
        why = f"differs in {', '.join(f'{k} ({a} != {b})' for k, (a, b) in diff.items())}" if diff else "has no weights"
        raise RandomModelError(f"--out {out} holds another model: it {why}; remove it or choose another --out")
    return True


def _tokenizer_files(src: str) -> list[str]:
    found = [n for n in TOKENIZER_FILES if os.path.isfile(os.path.join(src, n))]
    if "tokenizer.json" not in found and "vocab.json" not in found:
        raise RandomModelError(f"--tokenizer-from {src}: no tokenizer.json or vocab.json")
    return found


def _copy_tokenizer(src: str, dst: str) -> list[str]:
    copied = _tokenizer_files(src)
    for n in copied:
        shutil.copy2(os.path.join(src, n), os.path.join(dst, n))
    if os.path.isfile(os.path.join(src, "generation_config.json")):
        shutil.copy2(os.path.join(src, "generation_config.json"), os.path.join(dst, "generation_config.json"))
    return copied


def _tokenizer_size(src: str) -> int | None:
    path = os.path.join(src, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        tok = json.load(f)
    ids = list((tok.get("model") or {}).get("vocab", {}).values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1 if ids else None


def _save_weights(model, folder: str) -> None:
    model.save_pretrained(folder, safe_serialization=True)


def write_random_model(
    arch: str | Mapping,
    tokenizer_from: str,
    out: str,
    dtype: str = "bfloat16",
    seed: int = 0,
    device: str = "cpu",
    log=print,
) -> dict:
    """Write the folder (or find it already there; that check imports no torch). ``device``: cpu, cuda or auto.
    Returns {"out", "params", "skipped", "tokenizer_files"}."""
    if dtype not in DTYPES:
        raise RandomModelError(f"--dtype {dtype!r}: one of {', '.join(DTYPES)}")
    if not os.path.isdir(tokenizer_from):
        raise RandomModelError(f"--tokenizer-from {tokenizer_from}: not a folder")
    out = os.path.abspath(out)
    _tokenizer_files(tokenizer_from)
    token_ids = read_token_ids(tokenizer_from)
    vocab = arch_values(arch)["vocab_size"]
    n_tok = _tokenizer_size(tokenizer_from)
    if n_tok is not None and n_tok > vocab:
        raise RandomModelError(f"the tokenizer has {n_tok} ids, more than vocab_size {vocab}")
    if existing_matches(out, wanted(arch, token_ids, dtype)):
        log(f"[random_model] {out} already holds this model ({param_count(arch):,} parameters); nothing to do")
        return {"out": out, "params": param_count(arch), "skipped": True, "tokenizer_files": []}

    import torch
    from transformers import LlamaForCausalLM

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = config_for(arch, token_ids, dtype)

    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    try:
        torch.manual_seed(seed)
        with torch.device(device):
            model = LlamaForCausalLM._from_config(cfg, dtype=getattr(torch, dtype))
        params = sum(p.numel() for p in model.parameters())
        _save_weights(model, tmp)
        del model
        copied = _copy_tokenizer(tokenizer_from, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the finished folder gets the usual mode
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(
        f"[random_model] wrote {out}: LlamaForCausalLM, {params:,} parameters "
        f"({dtype}, seed {seed}, built on {device}),"
        f" tokenizer from {tokenizer_from}"
    )
    return {"out": out, "params": params, "skipped": False, "tokenizer_files": copied}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.random_model",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS), help="published architecture")
    ap.add_argument("--tokenizer-from", required=True, help="HF folder whose tokenizer files and token ids are used")
    ap.add_argument("--out", required=True, help="folder to write (skipped when it already holds this model)")
    ap.add_argument("--dtype", default="bfloat16", choices=DTYPES, help="weight dtype (default bfloat16)")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed before initialisation (default 0)")
    ap.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cuda", "cpu"),
        help="where the weights are built (default auto: cuda when available)",
    )
    args = ap.parse_args(argv)
    try:
        res = write_random_model(args.arch, args.tokenizer_from, args.out, args.dtype, args.seed, args.device)
    except RandomModelError as e:
        print(f"random_model: {e}", file=sys.stderr)
        return 2
    print(res["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
