"""The small pieces under the launcher, on CPU: the knob check, the GSM8K source rule, Hydra override strings
(``scripts/launch/overrides.py``, which the shell scripts call for later-wins merging) and the vj.* resolvers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import scripts
from scripts.launch import knobs, overrides
from tests.scripts.launch.test_recipes import gsm8k_dir  # noqa: F401  (the module fixture)

ROOT = scripts.ROOT


def test_secret_and_passed_names_are_no_unknown_knobs():
    assert (
        knobs.unknown(
            {
                "JUDGE_API_KEY": "x",
                "JUDGE_TOKEN": "y",
                "PASS_ENV": "JUDGE_CRED_FILE",
                "JUDGE_CRED_FILE": "z",
                "JUDGE_GPUS": "1",
                "MODEL_X": "1",
                "JUDGE_OTHER": "",
            }
        )
        == []
    )
    assert [m.split("=")[0] for m in knobs.unknown({"JUDGE_TP": "2", "VAL_MAX_SAMPLES": "8"})] == [
        "JUDGE_TP",
        "VAL_MAX_SAMPLES",
    ]


# a variable set -> the knob its message names (None: no message): a knob spelt without underscores or plural would
# be ignored (DRYRUN=1 would start a real run)
SPELT = [
    ("DRYRUN", "DRY_RUN"),
    ("dry_run", "DRY_RUN"),
    ("NGPUS", "N_GPUS"),
    ("N_GPU", "N_GPUS"),
    ("NOFLASHATTN", "NO_FLASH_ATTN"),
    ("GSM8KDIR", "GSM8K_DIR"),
    ("JUDGE_GPU", "JUDGE_GPUS"),  # starts like a knob too: one message, naming the knob
    ("RAYADDRESS", "RAY_ADDRESS"),
    ("MODEL_PATH", None),  # another name, not a spelling: no message (a shell may set it for other tools)
    ("HOME", None),
]


@pytest.mark.parametrize("name, knob", SPELT)
def test_a_knob_spelt_otherwise_is_named(name, knob):
    msgs = knobs.unknown({name: "1"})
    assert msgs == (
        []
        if knob is None
        else [
            f"{name}=1 is set, but no script reads it: did you mean {knob}? (python -m scripts.launch --knobs); set "
            f"that one, or unset {name}"
        ]
    )


def test_gsm8k_source(gsm8k_dir, tmp_path, monkeypatch):
    """One rule for the launcher and the pipeline: GSM8K_DIR, else ../shared/data/gsm8k when there, else the hub when
    it can be reached, else the word-problem testbed (D10: a fresh clone with no network still runs)."""
    from scripts.launch import defaults

    testbed = str(tmp_path / "data" / "word_problems")
    for shared, env, hub, want in (
        (gsm8k_dir, {}, True, gsm8k_dir),
        (gsm8k_dir, {"GSM8K_DIR": "/d"}, False, "/d"),
        (tmp_path, {}, True, None),
        (tmp_path, {"DATA_DIR": str(tmp_path / "data")}, False, testbed),
    ):
        monkeypatch.setattr(defaults, "SHARED_GSM8K", str(shared))
        monkeypatch.setattr(defaults, "hub_reachable", lambda env, hub=hub: hub)
        assert defaults.gsm8k_args(env) == (
            ["--hf"] if want is None else ["--train", f"{want}/train.jsonl", "--test", f"{want}/test.jsonl"]
        ) + (["--data-source", "word_problems"] if want == testbed else [])
    assert json.load(open(os.path.join(testbed, "settings.json")))["train"] == 5000  # built once, default settings


@pytest.mark.parametrize(
    "env, reachable",
    [
        ({"HF_HUB_OFFLINE": "1"}, False),
        ({"HF_DATASETS_OFFLINE": "true"}, False),
        ({"HF_ENDPOINT": "https://127.0.0.1:1"}, False),
    ],
)
def test_hub_reachable(env, reachable):
    from scripts.launch import defaults

    assert defaults.hub_reachable(env, timeout=1.0) is reachable


def test_overrides_later_wins_and_values():
    ovs = ["a.b=1", "+c.d=x", "a.b=2", "~e", "++c.d=y"]
    assert overrides.merge(ovs) == ["a.b=2", "~e", "++c.d=y"]
    assert overrides.merge(["a=1"], ["b=2", "a=3"]) == ["b=2", "a=3"]
    assert (overrides.value("c.d", ovs), overrides.value("z", ovs)) == ("y", None)
    assert [overrides.hydra_str(v) for v in ("/a/b.parquet", "1e-6", "true", "a b")] == [
        "/a/b.parquet",
        "'1e-6'",
        "'true'",
        "'a b'",
    ]


def test_overrides_command_line():
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "scripts.launch.overrides", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert run("merge", "a=1", "b=2", "a=3").stdout == "b=2\na=3\n"
    assert run("merge").stdout == ""
    assert run("value", "b", "a=1", "b=[x,y]").stdout == "[x,y]\n"
    assert run("nope").returncode == 2


@pytest.mark.parametrize("mode,flash", [("0", True), ("false", True), ("1", False), ("yes", False)])
def test_flash_attn_knob(mode, flash):
    assert knobs.flash_attn(mode) is flash
    assert knobs.RESOLVERS["vj.attn_implementation"](mode) == ("flash_attention_2" if flash else "sdpa")


def test_resolvers_reject_bad_values():
    with pytest.raises(ValueError, match="NO_FLASH_ATTN='maybe': expected 1, 0 or auto"):
        knobs.flash_attn("maybe")
    with pytest.raises(ValueError, match="JUDGE_GPUS='-1': expected an integer >= 0"):
        knobs.RESOLVERS["vj.judge_pool"]("-1")
    assert [knobs.RESOLVERS["vj.judge_pool"](g) for g in ("0", "2")] == [False, True]
    assert [knobs.RESOLVERS["vj.files"](v) for v in ("a.parquet", "a.parquet, b.parquet", None)] == [
        "a.parquet",
        ["a.parquet", "b.parquet"],
        None,
    ]


def test_environ_is_restored():
    before = dict(os.environ)
    with knobs.environ({"ONLY": "1"}):
        assert dict(os.environ) == {"ONLY": "1"}
    assert dict(os.environ) == before


@pytest.mark.parametrize(
    "value, bad",
    [
        ("1", False),
        ("true", False),
        ("print", False),
        ("0", False),
        ("", False),
        (" On ", False),
        ("bogus", True),
        ("2", True),
        ("dry", True),
    ],
)
def test_dry_run_values(value, bad):
    """D4: an unknown DRY_RUN value is an error, never a real run."""
    msgs = knobs.unknown({"DRY_RUN": value})
    assert msgs == (
        [f"DRY_RUN={value} is not one of (empty), 0, false, no, off, 1, true, yes, on, print"] if bad else []
    )


@pytest.mark.parametrize(
    "module",
    [
        ["scripts.launch", "gsm8k_rule"],
        ["scripts.lab.policy_learns", "--out", "x"],
        ["scripts.pipeline", "judge", "--out", "x"],
    ],
)
def test_unknown_dry_run_starts_nothing(module, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "RAY_ADDRESS")}
    r = subprocess.run(
        [sys.executable, "-m", *module],
        cwd=tmp_path,
        env={**env, "DRY_RUN": "bogus", "PYTHONPATH": knobs.ROOT},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "DRY_RUN=bogus is not one of" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr and not os.listdir(tmp_path)


def test_project_scripts_resolve_outside_the_repo(tmp_path):
    """E3: ``python -m scripts.<module>`` is the project's wherever the user stands (verl's wheel ships a top-level
    ``scripts`` of its own; scripts/setup_env.sh removes it from the project's venv)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DRY_RUN")}
    r = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "--knobs"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("| variable | read by | meaning |"), r.stderr[-2000:]
