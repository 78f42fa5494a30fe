"""data_prep.model's --out: a folder that holds something else is never replaced silently (audit D6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import scripts
from data_prep import model

ROOT = scripts.ROOT
REFUSED = "choose another --out, remove it, or pass --force to replace it"

# (what --out is, --force, exit status, converted, stderr lines with OUT for the --out path)
OUT_CASES = [
    ("missing", False, 0, True, []),
    ("empty", False, 0, True, []),
    ("model", False, 0, False, []),
    ("model", True, 0, True, []),
    (
        "notes",
        False,
        2,
        False,
        [f"error: --out OUT: exists and holds no converted model (no .complete marker); {REFUSED}"],
    ),
    ("notes", True, 0, True, ["replacing OUT: it holds no converted model (--force)"]),
    ("file", False, 2, False, ["error: --out OUT: exists and is not a folder"]),
    ("file", True, 2, False, ["error: --out OUT: exists and is not a folder"]),
]


def _make(tmp_path, kind: str) -> str:
    out = str(tmp_path / "out")
    if kind in ("empty", "model", "notes"):
        os.mkdir(out)
    if kind == "model":
        open(os.path.join(out, ".complete"), "w").write("full\n")
    if kind == "notes":
        open(os.path.join(out, "notes.txt"), "w").write("my notes\n")
    if kind == "file":
        open(out, "w").write("my notes\n")
    return out


@pytest.mark.parametrize("kind,force,rc,converted,stderr", OUT_CASES)
def test_d6_out_is_not_replaced_silently(tmp_path, monkeypatch, capsys, kind, force, rc, converted, stderr):
    out = _make(tmp_path, kind)
    calls = []
    monkeypatch.setattr(model, "find_gguf", lambda cache: "/nowhere/model.gguf")
    monkeypatch.setattr(model, "convert", lambda gguf, dest: calls.append(dest))
    assert model.main(["--out", out] + (["--force"] if force else [])) == rc
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("converting ")]
    assert err == [line.replace("OUT", out) for line in stderr]
    assert calls == ([out] if converted else [])
    if kind == "notes" and not force:
        assert os.listdir(out) == ["notes.txt"]


def test_d6_cli_refuses_a_folder_without_the_model(tmp_path):
    out = _make(tmp_path, "notes")
    r = subprocess.run(
        [sys.executable, "-m", "data_prep.model", "--out", out], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert (r.returncode, r.stdout, r.stderr) == (
        2,
        "",
        f"error: --out {out}: exists and holds no converted model (no .complete marker); {REFUSED}\n",
    )
    assert open(os.path.join(out, "notes.txt")).read() == "my notes\n"


# ($MODEL, $VERL_JUDGE_MODEL) -> the tokenizer data_prep measures prompts with when no --tokenizer is given: the
# recipes' model first (a user who trains MODEL=... gets prompts gated by that model's tokenizer)
TOKENIZER_DEFAULTS = [
    ("{model}", "{test}", "{model}"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "{test}", "Qwen/Qwen2.5-1.5B-Instruct"),
    (None, "{test}", "{test}"),
    (None, "{missing}", "{materialised}"),  # not a folder: the materialised SmolLM2
]


@pytest.mark.parametrize("model, test, want", TOKENIZER_DEFAULTS)
def test_the_default_tokenizer_is_the_recipes_model(model, test, want, tmp_path, monkeypatch):
    from data_prep import lengths

    dirs = {"model": tmp_path / "mine", "test": tmp_path / "test_model", "missing": tmp_path / "nowhere"}
    dirs = {k: str(v) for k, v in dirs.items()} | {"materialised": str(tmp_path / "materialised")}
    for k in ("model", "test"):
        os.makedirs(dirs[k])
    monkeypatch.setattr("data_prep.model.materialize", lambda: dirs["materialised"])
    monkeypatch.delenv("MODEL", raising=False)
    if model:
        monkeypatch.setenv("MODEL", model.format(**dirs))
    monkeypatch.setenv("VERL_JUDGE_MODEL", test.format(**dirs))
    assert lengths.default_tokenizer_path() == want.format(**dirs)
