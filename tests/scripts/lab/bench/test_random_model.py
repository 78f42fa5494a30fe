"""scripts.lab.bench.random_model: the published SmolLM2 configs, and a tiny random model written, reloaded and run."""

import filecmp
import json
import os
import subprocess
import sys

import pytest

import scripts
from scripts.lab.bench import random_model as rm

ROOT = scripts.ROOT

# HuggingFaceTB/SmolLM2-360M(-Instruct) and SmolLM2-1.7B(-Instruct) config.json, and their parameter counts
PUBLISHED = {
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
        head_dim=64,
        params=361_821_120,
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
        head_dim=64,
        params=1_711_376_384,
    ),
}
CASES = [(a, k, v) for a, vals in PUBLISHED.items() for k, v in vals.items()]
TINY = dict(
    rm.ARCHS["smollm2-360m"],
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
TINY_PARAMS = 49152 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64


@pytest.mark.parametrize("arch, key, value", CASES, ids=[f"{a}-{k}" for a, k, _v in CASES])
def test_published_config_values(arch, key, value):
    """The table holds the public configs; the LlamaConfig built from it (nothing allocated) carries them."""
    assert sorted(rm.ARCHS) == sorted(PUBLISHED)
    if key == "params":
        assert rm.param_count(arch) == value
        return
    cfg = rm.config_for(arch, {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2})
    got = rm.config_arch(cfg)[key] if key in rm.ARCH_KEYS else getattr(cfg, key)
    assert got == value and type(got) is type(value)
    if key in rm.ARCH_KEYS:
        assert rm.ARCHS[arch][key] == value


def test_token_ids_come_from_the_tokenizer_source(model_path):
    assert rm.read_token_ids(model_path) == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    cfg = rm.config_for("smollm2-1.7b", rm.read_token_ids(model_path))
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id, cfg.architectures) == (1, 2, 2, ["LlamaForCausalLM"])


@pytest.fixture(scope="module")
def tiny(model_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("rm") / "tiny"
    logs = []
    res = rm.write_random_model(TINY, model_path, str(out), seed=0, log=logs.append)
    return out, res, logs


def test_tiny_model_written_reloaded_and_run(tiny, model_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, res, logs = tiny
    assert res == {
        "out": str(out),
        "params": TINY_PARAMS,
        "skipped": False,
        "tokenizer_files": ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"],
    }
    assert rm.param_count(TINY) == TINY_PARAMS
    assert logs == [
        f"[random_model] wrote {out}: LlamaForCausalLM, {TINY_PARAMS:,} parameters (bfloat16, seed 0, "
        f"built on cpu), tokenizer from {model_path}"
    ]
    assert sorted(os.listdir(out)) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    for name in ("chat_template.jinja", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert filecmp.cmp(out / name, os.path.join(model_path, name), shallow=False), name
    cfg = json.loads((out / "config.json").read_text())
    assert {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id", "dtype", "architectures")} == {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 2,
        "dtype": "bfloat16",
        "architectures": ["LlamaForCausalLM"],
    }
    assert oct(os.stat(out).st_mode & 0o777) != oct(0o700)  # not mkdtemp's private mode

    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert model.dtype == torch.bfloat16 and sum(p.numel() for p in model.parameters()) == TINY_PARAMS
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    std = model.model.layers[0].mlp.up_proj.weight.float().std().item()
    assert 0.015 < std < 0.025  # the model's own init (initializer_range 0.02), not zeros
    ids = tok("Natalia sold clips to 48 of her friends.", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], 49152) and torch.isfinite(logits.float()).all()
    assert tok.eos_token_id == 2 and model.generation_config.eos_token_id == 2


@pytest.mark.parametrize("seed, same", [(0, True), (1, False)])
def test_seed_decides_the_weights(tiny, model_path, tmp_path, seed, same):
    out, _res, _logs = tiny
    other = rm.write_random_model(TINY, model_path, str(tmp_path / "again"), seed=seed, log=lambda m: None)
    assert (
        filecmp.cmp(out / "model.safetensors", os.path.join(other["out"], "model.safetensors"), shallow=False) is same
    )


def test_resume_skips_a_matching_folder_and_refuses_another(tiny, model_path, capsys):
    out, _res, _logs = tiny
    before = {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)}
    logs = []
    res = rm.write_random_model(TINY, model_path, str(out), log=logs.append)
    assert res == {"out": str(out), "params": TINY_PARAMS, "skipped": True, "tokenizer_files": []}
    assert logs == [f"[random_model] {out} already holds this model ({TINY_PARAMS:,} parameters); nothing to do"]
    assert {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)} == before
    # another architecture or dtype in the folder: an error naming the difference, nothing touched
    with pytest.raises(rm.RandomModelError, match=r"differs in num_hidden_layers \(2 != 3\)"):
        rm.write_random_model(dict(TINY, num_hidden_layers=3), model_path, str(out))
    with pytest.raises(rm.RandomModelError, match=r"differs in dtype \(bfloat16 != float32\)"):
        rm.write_random_model(TINY, model_path, str(out), dtype="float32")
    # the CLI: exit 2 with the message, before any weights are built
    assert (
        rm.main(["--arch", "smollm2-1.7b", "--tokenizer-from", model_path, "--out", str(out), "--device", "cpu"]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"random_model: --out {out} holds another model: it differs in hidden_size (64 != 2048)")
    assert {n: os.stat(out / n).st_mtime_ns for n in os.listdir(out)} == before


def test_cli_skips_a_folder_that_holds_the_arch(model_path, tmp_path, capsys):
    """A folder with the 1.7B config and weights: the CLI exits 0 without building 1.7B parameters."""
    out = tmp_path / "judge"
    rm.config_for("smollm2-1.7b", rm.read_token_ids(model_path)).save_pretrained(out)
    (out / "model.safetensors").write_bytes(b"")
    assert rm.main(["--arch", "smollm2-1.7b", "--tokenizer-from", model_path, "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"[random_model] {out} already holds this model (1,711,376,384 parameters); nothing to do",
        str(out),
    ]


def test_failure_leaves_no_partial_folder(model_path, tmp_path, monkeypatch):
    def broken(model, folder):
        (open(os.path.join(folder, "model.safetensors"), "wb")).close()
        raise OSError("disk full")

    monkeypatch.setattr(rm, "_save_weights", broken)
    with pytest.raises(OSError, match="disk full"):
        rm.write_random_model(TINY, model_path, str(tmp_path / "m"))
    assert os.listdir(tmp_path) == []  # neither the folder nor the temporary one


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(arch="smollm2-7b"), "unknown --arch 'smollm2-7b'; known: smollm2-360m, smollm2-1.7b"),
        (dict(arch=dict(TINY, vocab_size=1000)), "the tokenizer has 49152 ids, more than vocab_size 1000"),
        (dict(dtype="int8"), "--dtype 'int8': one of bfloat16, float16, float32"),
        (dict(tokenizer_from="/nonexistent"), "--tokenizer-from /nonexistent: not a folder"),
        (dict(tokenizer_from="@empty"), "--tokenizer-from @empty: no tokenizer.json or vocab.json"),
    ],
)
def test_bad_arguments(model_path, tmp_path, kwargs, msg):
    args = {"arch": TINY, "tokenizer_from": model_path, "out": str(tmp_path / "out" / "m"), **kwargs}
    if args["tokenizer_from"] == "@empty":  # a model folder without tokenizer files
        args["tokenizer_from"] = str(tmp_path / "empty")
        os.makedirs(args["tokenizer_from"])
        msg = msg.replace("@empty", args["tokenizer_from"])
    with pytest.raises(rm.RandomModelError) as e:
        rm.write_random_model(**args)
    assert str(e.value) == msg
    assert not os.path.exists(tmp_path / "out")


def test_help():
    r = subprocess.run(
        [sys.executable, "-m", "scripts.lab.bench.random_model", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python -m scripts.lab.bench.random_model ")
    for opt in ("--arch", "--tokenizer-from", "--out", "--dtype", "--seed", "--device", "smollm2-360m", "smollm2-1.7b"):
        assert opt in r.stdout
