"""Recipes, the shared launcher and runtime_env, on CPU.

* DRY_RUN=1 of every recipe through its run.sh -> scripts/launch.sh -> scripts/launch/launcher.py (judge_to_reward:
  scripts/workflows/pipeline.py): the default data is built by data_prep, the composed recipe config passes verl's
  schema, secrets never print.
* The plan of every recipe, exactly: the knobs the run gets (MODEL, TRAIN_FILES, ...), the command
  (python -m scripts.train --config-path recipes/<r>), the data_prep command of the default data.
* Each knob the recipe configs read (``${oc.env:NAME}``) sets the keys it is read into; arguments win;
  a variable that looks like a knob but is none stops the launcher, naming it; values out of range or
  that do not resolve stop it before anything starts, naming the setting and the knob.
* Each default is written once (base.yaml or a recipe's config.yaml, llm_judge's own in llm_judge.py);
  the knobs table in recipes/README.md is the launcher's --knobs output.
Running and Ray jobs (secrets by name, the private head): tests/scripts/launch/test_launch_run.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

import scripts
from scripts import console
from scripts.launch import config_compose, knobs, verl_config
from scripts.launch import launcher as launch

ROOT = scripts.ROOT
RECIPES = ["judge_pointwise", "judge_pairwise", "gsm8k_rule", "gsm8k_api_judge", "gsm8k_local_judge"]
ALL_RECIPES = RECIPES + ["judge_to_reward"]
# Fake keys, assembled at run time so secret scanners do not mistake the test for a leak.
SECRET = "sk-" + "test-7f3a9c1e5b2d4f6a8c0e"
INLINE_SECRET = "sk-" + "inline-0123456789abcdef"
HF_SECRET = "hf_testTOKENabcdef123456"
SWAN_SECRET = "swan-test-key-0123456789"
OTHER_SECRET = "other-cred-abcdef0123456789"

pytest.importorskip("verl")

# recipe -> (verl_judge.default_data, data_prep module, data folder, train file, val file, max prompt length)
DATA = {
    "judge_pointwise": (
        "verify_pointwise",
        "data_prep.gsm8k_verify",
        "gsm8k_verify_p1280",
        "pointwise_train.parquet",
        "pointwise_test.parquet",
        1280,
    ),
    "judge_pairwise": (
        "verify_pairwise",
        "data_prep.gsm8k_verify",
        "gsm8k_verify_p1280",
        "pairwise_train.parquet",
        "pairwise_test.parquet",
        1280,
    ),
    "gsm8k_rule": ("gsm8k", "data_prep.gsm8k", "gsm8k_p512", "train.parquet", "test.parquet", 512),
    "gsm8k_api_judge": ("gsm8k", "data_prep.gsm8k", "gsm8k_p512", "train.parquet", "test.parquet", 512),
    "gsm8k_local_judge": ("gsm8k", "data_prep.gsm8k", "gsm8k_p512", "train.parquet", "test.parquet", 512),
}
GSM8K_ROWS = [
    {
        "question": "Tom has 3 apples and buys 4 more. How many apples does he have?",
        "answer": "Tom has 3+4=<<3+4=7>>7 apples.\n#### 7",
    },
    {
        "question": "A box holds 12 pens. How many pens are in 5 boxes?",
        "answer": "5 boxes hold 5*12=<<5*12=60>>60 pens.\n#### 60",
    },
    {
        "question": "A book costs 8 dollars. How much do 6 books cost?",
        "answer": "6 books cost 6*8=<<6*8=48>>48 dollars.\n#### 48",
    },
    {
        "question": "Ann reads 10 pages a day for 3 days, then 5 pages a day for 2 days. How many pages?",
        "answer": "First she reads 10*3=<<10*3=30>>30 pages.\nThen 5*2=<<5*2=10>>10 pages.\n"
        "In total 30+10=<<30+10=40>>40 pages.\n#### 40",
    },
] + [  # one batch (data.train_batch_size=16) and more: the dry run refuses less
    {
        "question": f"A crate holds {k} eggs. How many eggs are in 2 crates?",
        "answer": f"2 crates hold 2*{k}=<<2*{k}={2 * k}>>{2 * k} eggs.\n#### {2 * k}",
    }
    for k in range(3, 19)
]
BATCH_ROWS = 16  # rows of each fx parquet: one batch of recipes/base.yaml's data.train_batch_size


# ----------------------------------------------------------------------------------------------- helpers
def base_env(**extra) -> dict:
    """The current environment without any knob, knob-like variable or secret, plus PYTHON = this interpreter."""
    drop = set(knobs.BY_NAME) | {"VERL_FILE_LOGGER_PATH", "RAY_ADDRESS"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(knobs.PREFIXES) and not console.SECRET_NAME.search(k)
    }
    env["PYTHON"] = sys.executable
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_recipe(recipe, env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", os.path.join(ROOT, "recipes", recipe, "run.sh"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def plan(recipe, env, *args) -> launch.Plan:
    return launch.plan(env, list(args), recipe, materialize=False)


def select(cfg, key):
    from omegaconf import OmegaConf

    v = OmegaConf.select(cfg, key, default="<absent>")
    return OmegaConf.to_container(v) if OmegaConf.is_config(v) else v


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return a == b


def sdpa_off(**extra) -> dict:
    return base_env(**{"NO_FLASH_ATTN": 0, **extra})


# ----------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """Small verl-style parquet files of one batch each: GSM8K policy rows, pointwise and pairwise judge rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("recipe_data")
    q = (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did she sell altogether?"
    )
    sol = "In May she sold 48 / 2 = 24 clips. Altogether 48 + 24 = 72.\n#### 72"
    policy = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": q + " End with #### <number>."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "72"},
            "extra_info": {"split": "train", "index": 0, "question": q, "answer": sol},
        }
    ]
    point = [
        {
            "data_source": "gsm8k_verify/pointwise",
            "prompt": [{"role": "user", "content": f"# Query\n{q}\n# Response\n{sol}"}],
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": "4"},
            "extra_info": {"split": "train", "index": 0},
        }
    ]
    pair = [
        {
            "data_source": "gsm8k_verify/pairwise",
            "prompt": [{"role": "user", "content": f"{q}\nA: {sol}\nB: 48 + 48 = 96\n#### 96"}],
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": "A"},
            "extra_info": {"split": "train", "index": 0},
        }
    ]
    files = {}
    for name, rows in (("policy", policy), ("pointwise", point), ("pairwise", pair)):
        for split in ("train", "test"):
            p = d / f"{name}_{split}.parquet"
            batch = [{**r, "extra_info": {**r["extra_info"], "index": i}} for i in range(BATCH_ROWS) for r in rows]
            pq.write_table(pa.Table.from_pylist(batch), str(p))
            files[(name, split)] = str(p)
    return files


@pytest.fixture(scope="module")
def gsm8k_dir(tmp_path_factory):
    """A GSM8K_DIR: train.jsonl and test.jsonl with a few rows data_prep can use."""
    d = tmp_path_factory.mktemp("gsm8k")
    for split in ("train", "test"):
        (d / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    return str(d)


def recipe_files(fx, recipe):
    kind = {"judge_pointwise": "pointwise", "judge_pairwise": "pairwise"}.get(recipe, "policy")
    return {"TRAIN_FILES": fx[(kind, "train")], "VAL_FILES": fx[(kind, "test")]}


# The judge recipes and gsm8k_rule build their default data from GSM8K_DIR; the others get files.
BUILDS_DATA = ("judge_pointwise", "judge_pairwise", "gsm8k_rule", "judge_to_reward")
J2R_ARGS = ("actor_rollout_ref.rollout.n=2", "--policy-override", "actor_rollout_ref.rollout.n=3")


@pytest.fixture(scope="module")
def dry_runs(fx, model_path, gsm8k_dir, tmp_path_factory):
    """DRY_RUN=1 of every recipe through its run.sh, run concurrently; {recipe: (CompletedProcess, folder)}."""
    out = tmp_path_factory.mktemp("dry")
    secrets = {"OPENAI_API_KEY": SECRET, "HF_TOKEN": HF_SECRET, "SWANLAB_API_KEY": SWAN_SECRET}

    def one(recipe):
        d = out / recipe
        env = base_env(DRY_RUN=1, DATA_DIR=d / "data", OUTPUT_DIR=d / "run", GSM8K_DIR=gsm8k_dir, **secrets)
        if recipe != "gsm8k_rule":  # gsm8k_rule: the default model, materialised (cached) by the launcher
            env["MODEL"] = model_path
        if recipe not in BUILDS_DATA:
            env.update(recipe_files(fx, recipe))
        args = J2R_ARGS if recipe == "judge_to_reward" else (f"trainer.default_local_dir={d / 'ckpt'}",)
        return recipe, run_recipe(recipe, env, *args, timeout=900), d

    with cf.ThreadPoolExecutor(max_workers=3) as ex:
        results = list(ex.map(one, ALL_RECIPES))
    return {rec: (r, d) for rec, r, d in results}


# ----------------------------------------------------------------------------------------------- dry runs
@pytest.mark.slow
@pytest.mark.parametrize("recipe", ALL_RECIPES)
def test_dry_run_passes(dry_runs, recipe, model_path):
    from data_prep.model import default_out

    r, d = dry_runs[recipe]
    text = r.stdout + r.stderr
    assert r.returncode == 0, text[-4000:]
    stages = ["judge_pointwise", "gsm8k_local_judge"] if recipe == "judge_to_reward" else [recipe]
    assert text.count("[launch] config OK: recipe ") == len(stages), text[-4000:]
    assert "CONFIG ERROR" not in text
    for stage in stages:  # the full command is printed
        assert f"-m scripts.train --config-path {ROOT}/recipes/{stage} --config-name config " in text
    for s in (SECRET, HF_SECRET, SWAN_SECRET):
        assert s not in text, f"secret printed by {recipe}"
    assert not os.path.exists(d / "ckpt") and not os.path.exists(d / "run"), "a dry run must not create run folders"
    model = default_out() if recipe == "gsm8k_rule" else model_path
    assert f"MODEL={model} " in text
    if recipe in BUILDS_DATA:  # built by data_prep from GSM8K_DIR: the files exist and are the ones checked
        for stage in stages:
            _, _, folder, train, val, _ = DATA[stage]
            for f in (train, val):
                assert os.path.getsize(d / "data" / folder / f) > 0
            assert f"TRAIN_FILES={d / 'data' / folder / train} VAL_FILES={d / 'data' / folder / val} " in text
    if recipe == "judge_to_reward":
        judge, policy = [ln for ln in r.stdout.splitlines() if "-m scripts.train" in ln]
        assert "actor_rollout_ref.rollout.n=2" in judge and "actor_rollout_ref.rollout.n=3" in policy
        assert (
            f"[pipeline] DRY_RUN: would run: python -m scripts.pipeline judge_to_reward --out "
            f"{ROOT}/outputs/judge_to_reward {' '.join(J2R_ARGS)}" in text
        )
        assert not os.path.exists(os.path.join(ROOT, "outputs", "judge_to_reward", "grpo"))


@pytest.mark.parametrize("recipe", RECIPES)
def test_plan_per_recipe(recipe, fx, model_path, tmp_path):
    """The exact plan: the recipe config carries every setting and reads the knobs; the launcher adds only
    the metrics file."""
    files = recipe_files(fx, recipe)
    p = plan(recipe, sdpa_off(MODEL=model_path, OUTPUT_DIR=tmp_path, **files))
    metrics = tmp_path / "metrics.jsonl"
    assert p.overrides == [f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={metrics}"]
    assert p.knobs == {"MODEL": model_path, **files, "NO_FLASH_ATTN": "0"}
    assert p.command == [
        sys.executable,
        "-m",
        "scripts.train",
        "--config-path",
        os.path.join(ROOT, "recipes", recipe),
        "--config-name",
        "config",
        *p.overrides,
    ]
    assert (p.mode, p.metrics_file, p.output_dir, p.data, p.notes) == ("local", str(metrics), str(tmp_path), None, [])
    assert p.env == {"PYTHONPATH": ROOT, "RAY_ADDRESS": "<private local head>"}


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("local_gsm8k", [True, False], ids=["gsm8k_dir", "hub"])
def test_default_data_plan(recipe, local_gsm8k, model_path, tmp_path, monkeypatch, capsys):
    """No data files given: the recipe's default data set, built by data_prep into DATA_DIR (GSM8K from
    GSM8K_DIR, else ../shared/data/gsm8k when it is there, else the hub)."""
    from scripts.launch import defaults

    monkeypatch.setattr(defaults, "SHARED_GSM8K", str(tmp_path / "no_shared"))
    monkeypatch.setattr(defaults, "hub_reachable", lambda env: True)
    kind, module, folder, train, val, max_len = DATA[recipe]
    extra = {"GSM8K_DIR": "/data/gsm8k"} if local_gsm8k else {}
    p = plan(recipe, sdpa_off(MODEL=model_path, DATA_DIR=tmp_path, **extra))
    d = tmp_path / folder
    # a plan builds nothing (DRY_RUN=print): it says what it would run
    assert f"[launch] data ({kind}): would build with: " in capsys.readouterr().out
    source = ["--train", "/data/gsm8k/train.jsonl", "--test", "/data/gsm8k/test.jsonl"] if local_gsm8k else ["--hf"]
    assert p.data == [
        sys.executable,
        "-m",
        module,
        "--out",
        str(d),
        "--no-progress",
        *source,
        "--max-prompt-length",
        str(max_len),
        "--tokenizer",
        model_path,
    ]
    assert (p.knobs["TRAIN_FILES"], p.knobs["VAL_FILES"]) == (str(d / train), str(d / val))
    # an argument naming the files: nothing to build, the argument is used as given
    p = plan(
        recipe,
        sdpa_off(MODEL=model_path, DATA_DIR=tmp_path),
        "data.train_files=/x/a.parquet",
        "data.val_files=/x/b.parquet",
    )
    assert p.data is None and p.overrides[-2:] == ["data.train_files=/x/a.parquet", "data.val_files=/x/b.parquet"]
    assert "TRAIN_FILES" not in p.knobs and "VAL_FILES" not in p.knobs
    # files that exist, built from the source this run asks for (source.json): used, not rebuilt
    d.mkdir()
    (d / train).write_text("x")
    (d / val).write_text("x")
    source = "GSM8K files in /data/gsm8k" if local_gsm8k else "the HF hub (openai/gsm8k)"
    (d / "source.json").write_text(json.dumps({"source": source, "tokenizer": model_path}))
    p = plan(recipe, sdpa_off(MODEL=model_path, DATA_DIR=tmp_path, **extra))
    assert p.data is None and (p.knobs["TRAIN_FILES"], p.knobs["VAL_FILES"]) == (str(d / train), str(d / val))
    assert p.notes == [f"data ({kind}): built from {source} into {d}"]
    # the same source measured with another model's tokenizer (verl gates prompt length with the policy's): rebuilt
    (d / "source.json").write_text(json.dumps({"source": source, "tokenizer": "/models/other"}))
    p = plan(recipe, sdpa_off(MODEL=model_path, DATA_DIR=tmp_path, **extra))
    assert p.data is not None and p.data[p.data.index("--tokenizer") + 1] == model_path


def test_recipe_without_default_data_needs_files(tmp_path, model_path, fx):
    rdir = tmp_path / "my_recipe"
    rdir.mkdir()
    text = (
        open(os.path.join(ROOT, "recipes", "gsm8k_rule", "config.yaml"))
        .read()
        .replace("default_data: gsm8k", "default_data: null")
    )
    (rdir / "config.yaml").write_text(text)
    with pytest.raises(
        launch.LaunchError, match=r"has no default data \(verl_judge.default_data=None\): set TRAIN_FILES"
    ):
        plan(str(rdir), sdpa_off(MODEL=model_path))
    assert plan(str(rdir), sdpa_off(MODEL=model_path, **recipe_files(fx, "gsm8k_rule"))).data is None


# ----------------------------------------------------------------------------------------------- knobs
# knob read by the recipe configs -> (value, {key: expected value in the composed config})
KNOB_VALUES = {
    "MODEL": ("/tmp/vj-test-model", {"actor_rollout_ref.model.path": "/tmp/vj-test-model"}),
    "JUDGE_MODEL": ("/tmp/vj-judge", {"reward.reward_model.model_path": "/tmp/vj-judge"}),
    "TRAIN_FILES": (
        "/tmp/vj-a.parquet,/tmp/vj-b.parquet",
        {"data.train_files": ["/tmp/vj-a.parquet", "/tmp/vj-b.parquet"]},
    ),
    "VAL_FILES": ("/tmp/vj-v.parquet", {"data.val_files": "/tmp/vj-v.parquet"}),
    "REWARD_FN": ("/tmp/vj-reward.py", {"reward.custom_reward_function.path": "/tmp/vj-reward.py"}),
    "REWARD_FN_NAME": ("my_score", {"reward.custom_reward_function.name": "my_score"}),
    "N_GPUS": ("2", {"trainer.n_gpus_per_node": 2}),
    "NNODES": ("3", {"trainer.nnodes": 3}),
    "JUDGE_GPUS": (
        "2",
        {
            "reward.reward_model.enable_resource_pool": True,
            "reward.reward_model.n_gpus_per_node": 2,
            "reward.reward_model.nnodes": 1,
            "reward.reward_model.rollout.free_cache_engine": False,
        },
    ),
    "JUDGE_BASE_URL": (
        "http://127.0.0.1:9/v1",
        {"reward.custom_reward_function.reward_kwargs.base_url": "http://127.0.0.1:9/v1"},
    ),
    "NO_FLASH_ATTN": (
        "1",
        {
            "actor_rollout_ref.model.use_remove_padding": False,
            "actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        },
    ),
}


def test_config_knobs_are_the_ones_the_recipes_read():
    """Every knob of the table marked "config" is read by a recipe YAML file (``${oc.env:NAME``), each one a
    YAML file reads is in the table, and each has a test value here."""
    texts = [
        open(f).read()
        for f in [os.path.join(ROOT, "recipes", "base.yaml")]
        + [f for r in RECIPES for f in glob.glob(os.path.join(ROOT, "recipes", r, "**", "*.yaml"), recursive=True)]
    ]
    read = {n for t in texts for n in re.findall(r"oc\.env:([A-Z0-9_]+)", t)}
    config = {k.name for k in knobs.KNOBS if k.where == "config"}
    assert read == config == set(KNOB_VALUES)


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_knob_sets_its_keys(recipe, fx, model_path):
    """All knobs at once: each key the recipe reads a knob into changes from its default to the knob's value;
    a knob the recipe does not read is noted, not used."""
    base = sdpa_off(MODEL=model_path, **recipe_files(fx, recipe))
    with knobs.environ({**base, **plan(recipe, base).knobs}):
        before = config_compose.compose([], recipe)
        before = {k: select(before, k) for _, keys in KNOB_VALUES.values() for k in keys}
    env = {**base, **{k: v for k, (v, _) in KNOB_VALUES.items()}}
    p = plan(recipe, env)
    text = "".join(
        open(f).read()
        for f in [os.path.join(ROOT, "recipes", "base.yaml")]  # config.yaml and its groups
        + glob.glob(os.path.join(ROOT, "recipes", recipe, "**", "*.yaml"), recursive=True)
    )
    with knobs.environ({**env, **p.knobs}):
        after = config_compose.compose(p.overrides, recipe)
        after = {k: select(after, k) for _, keys in KNOB_VALUES.values() for k in keys}
    problems = []
    already = {
        ("JUDGE_GPUS", "reward.reward_model.rollout.free_cache_engine"),
        ("JUDGE_GPUS", "reward.reward_model.nnodes"),
    }
    for name, (value, expected) in KNOB_VALUES.items():
        if f"oc.env:{name}" not in text:
            assert f"{name} ignored: recipe {recipe} does not read it (no ${{oc.env:{name}}} in its config)" in p.notes
            continue
        for key, want in expected.items():
            got = after[key]
            if not same(got, want):
                problems.append(f"{name}={value}: {key} = {got!r}, expected {want!r}")
            elif same(got, before[key]) and (name, key) not in already:
                problems.append(f"{name}={value}: {key} did not change (still {got!r})")
    assert not problems, "\n".join(problems)


def test_judge_knobs_on_a_recipe_without_a_judge(fx, model_path):
    p = plan(
        "gsm8k_rule", sdpa_off(MODEL=model_path, JUDGE_MODEL="/tmp/j", JUDGE_GPUS="1", **recipe_files(fx, "gsm8k_rule"))
    )
    assert p.notes == [
        "JUDGE_MODEL ignored: recipe gsm8k_rule does not read it (no ${oc.env:JUDGE_MODEL} in its config)",
        "JUDGE_GPUS ignored: recipe gsm8k_rule does not read it (no ${oc.env:JUDGE_GPUS} in its config)",
    ]
    env = sdpa_off(MODEL=model_path, JUDGE_GPUS="0", **recipe_files(fx, "gsm8k_local_judge"))
    with knobs.environ(env):
        colocated = config_compose.compose(plan("gsm8k_local_judge", env).overrides, "gsm8k_local_judge")
        assert (
            colocated.reward.reward_model.enable_resource_pool,
            colocated.reward.reward_model.rollout.free_cache_engine,
            colocated.reward.reward_model.model_path,
        ) == (False, False, model_path)


def test_swanlab_key_adds_the_logger(fx, model_path):
    env = sdpa_off(MODEL=model_path, SWANLAB_API_KEY=SWAN_SECRET, **recipe_files(fx, "gsm8k_rule"))
    assert "trainer.logger=[console,file,swanlab]" in plan("gsm8k_rule", env).overrides
    assert "trainer.logger=[console]" in plan("gsm8k_rule", env, "trainer.logger=[console]").overrides
    assert not [o for o in plan("gsm8k_rule", env, "trainer.logger=[console]").overrides if "swanlab" in o]


def test_arguments_win_over_the_knobs(fx, model_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    env = sdpa_off(
        MODEL=model_path, N_GPUS=2, NO_FLASH_ATTN=1, REWARD_FN="reward_fns/gsm8k.py", **recipe_files(fx, "gsm8k_rule")
    )
    args = [
        "trainer.n_gpus_per_node=3",
        "actor_rollout_ref.model.override_config.attn_implementation=eager",
        "trainer.logger=[console]",
        "trainer.n_gpus_per_node=4",
    ]  # a later argument for a key wins
    p = plan("gsm8k_rule", env, *args)
    assert p.overrides[1:] == args[1:]
    assert p.knobs["REWARD_FN"] == os.path.join(ROOT, "reward_fns", "gsm8k.py")  # cwd-relative -> absolute
    with knobs.environ({**env, **p.knobs}):
        cfg = config_compose.compose(p.overrides, "gsm8k_rule")
        assert (
            cfg.trainer.n_gpus_per_node,
            cfg.actor_rollout_ref.model.override_config.attn_implementation,
            list(cfg.trainer.logger),
            cfg.actor_rollout_ref.model.use_remove_padding,
        ) == (4, "eager", ["console"], False)
        assert cfg.reward.custom_reward_function.path == os.path.join(ROOT, "reward_fns", "gsm8k.py")
    assert p.notes == ["trainer.logger has no 'file': no metrics JSONL is written"]


# a variable that looks like a knob (JUDGE_*, TRAIN_*, ROLLOUT_*, ...) but is none: a misspelt or a removed one
NOT_KNOBS = {
    "JUDGE_MODE": "hybrid",
    "TRAIN_BATCH_SIZE": "8",
    "ROLLOUT_N": "3",
    "JUDGE_MODEL_NAME": "judge",
    "REWARD_MANAGER": "naive",
    "JUDGE_MODLE": "/tmp/j",
}


@pytest.mark.parametrize("name", list(NOT_KNOBS))
def test_a_variable_that_is_no_knob_stops_the_launcher(name, capsys, fx, model_path):
    value = NOT_KNOBS[name]
    rc = launch.main(
        ["gsm8k_rule"], sdpa_off(MODEL=model_path, DRY_RUN="1", **{name: value}, **recipe_files(fx, "gsm8k_rule"))
    )
    out = capsys.readouterr().out
    assert (
        rc == 2
        and f"[launch] ERROR: {name}={value} is set, but no script reads it: it is not one of the knobs "
        f"(python -m scripts.launch --knobs); give the setting as a Hydra override argument (KEY=VALUE), "
        f"or unset {name}"
        in out
    ), out


# (recipe, knobs, arguments, the message); each of these passed as "config OK" or crashed verl before
OUT_OF_RANGE = {
    "n_gpus_negative": (
        "gsm8k_rule",
        {"N_GPUS": "-1"},
        [],
        "trainer.n_gpus_per_node=-1: must be an integer >= 1 (set by N_GPUS=-1)",
    ),
    "n_gpus_zero": (
        "gsm8k_rule",
        {"N_GPUS": "0"},
        [],
        "trainer.n_gpus_per_node=0: must be an integer >= 1 (set by N_GPUS=0)",
    ),
    "n_gpus_word": (
        "gsm8k_rule",
        {"N_GPUS": "two"},
        [],
        "trainer.n_gpus_per_node='two': must be an integer >= 1 (set by N_GPUS=two)",
    ),
    "nnodes_zero": (
        "judge_pairwise",
        {"NNODES": "0"},
        [],
        "trainer.nnodes=0: must be an integer >= 1 (set by NNODES=0)",
    ),
    "judge_pool_negative_override": (
        "gsm8k_local_judge",
        {"JUDGE_GPUS": "1"},
        ["reward.reward_model.n_gpus_per_node=-2"],
        "reward.reward_model.n_gpus_per_node=-2: must be an integer >= 1",
    ),
    "judge_gpus_negative": (
        "gsm8k_local_judge",
        {"JUDGE_GPUS": "-1"},
        [],
        "reward.reward_model.enable_resource_pool: JUDGE_GPUS='-1': expected an integer >= 0 (set by JUDGE_GPUS=-1)",
    ),
    "no_flash_attn_word": (
        "gsm8k_rule",
        {"NO_FLASH_ATTN": "maybe"},
        [],
        "actor_rollout_ref.model.use_remove_padding: NO_FLASH_ATTN='maybe': expected 1, 0 or auto "
        "(set by NO_FLASH_ATTN=maybe)",
    ),
    "temperature_negative": (
        "gsm8k_rule",
        {},
        ["actor_rollout_ref.rollout.temperature=-1"],
        "actor_rollout_ref.rollout.temperature=-1: must be a number >= 0",
    ),
    "gpu_mem_over_one": (
        "gsm8k_api_judge",
        {},
        ["actor_rollout_ref.rollout.gpu_memory_utilization=1.5"],
        "actor_rollout_ref.rollout.gpu_memory_utilization=1.5: must be a number in (0, 1]",
    ),
    "judge_gpu_mem_zero": (
        "gsm8k_local_judge",
        {},
        ["reward.reward_model.rollout.gpu_memory_utilization=0"],
        "reward.reward_model.rollout.gpu_memory_utilization=0: must be a number in (0, 1]",
    ),
    "lr_negative": (
        "judge_pointwise",
        {},
        ["actor_rollout_ref.actor.optim.lr=-1e-6"],
        "actor_rollout_ref.actor.optim.lr=-1e-06: must be a number > 0",
    ),
    "batch_zero": ("gsm8k_rule", {}, ["data.train_batch_size=0"], "data.train_batch_size=0: must be an integer >= 1"),
    "mini_batch_zero": (
        "gsm8k_rule",
        {},
        ["actor_rollout_ref.actor.ppo_mini_batch_size=0"],
        "actor_rollout_ref.actor.ppo_mini_batch_size=0: must be an integer >= 1",
    ),
    "rollout_n_zero": (
        "judge_pairwise",
        {},
        ["actor_rollout_ref.rollout.n=0"],
        "actor_rollout_ref.rollout.n=0: must be an integer >= 1",
    ),
}


@pytest.mark.parametrize("name", list(OUT_OF_RANGE))
def test_values_out_of_range_stop_before_anything_starts(name, capsys, model_path, tmp_path):
    """Checked on the composed config (knobs and arguments alike), before data is built."""
    recipe, env, args, msg = OUT_OF_RANGE[name]
    rc = launch.main(
        [recipe, *args],
        sdpa_off(
            MODEL=model_path,
            DRY_RUN="1",
            DATA_DIR=tmp_path / "data",
            OUTPUT_DIR=tmp_path / "run",
            GSM8K_DIR=tmp_path / "none",
            **env,
        ),
    )
    out = capsys.readouterr().out
    assert rc == 2, out
    assert f"[launch] CONFIG ERROR: {msg}\n" in out
    assert "setting(s) out of range or unresolvable; nothing was started" in out
    assert not os.path.exists(tmp_path / "data") and not os.path.exists(tmp_path / "run")


def test_an_unset_knob_the_config_needs_is_named(capsys, fx):
    """python -m scripts.launch.verl_config without MODEL: the key and the variable it reads are named."""
    with knobs.environ(base_env(**recipe_files(fx, "gsm8k_rule"))):
        with pytest.raises(config_compose.ConfigError) as e:
            verl_config.check([], recipe="gsm8k_rule")
    assert e.value.errors == [
        "actor_rollout_ref.model.path: the environment variable MODEL is not set (set it, or pass "
        "actor_rollout_ref.model.path=...)"
    ]


# (recipe, knobs, arguments) -> the CONFIG ERROR the dry run stops with (None: config OK)
DRY_RUN_CHECKS = {
    "plus_outside_allowlist": ("gsm8k_rule", {}, ["+trainer.my_knob=1"], "adds key 'trainer.my_knob'"),
    "legacy_reward_key": (
        "gsm8k_rule",
        {},
        ["custom_reward_function.path=x.py"],
        "legacy reward key 'custom_reward_function.path'",
    ),
    "missing_file": (
        "gsm8k_rule",
        {"TRAIN_FILES": "/nonexistent/t.parquet"},
        [],
        "data.train_files: file not found: /nonexistent/t.parquet (set by TRAIN_FILES=/nonexistent/t.parquet)",
    ),
    "colocated_judge_on_v1": (
        "gsm8k_local_judge",
        {},
        ["trainer.use_v1=true"],
        "set trainer.use_v1=False (legacy trainer",
    ),
    "judge_pool": ("gsm8k_local_judge", {"JUDGE_GPUS": "1"}, [], None),
}


@pytest.mark.parametrize("name", list(DRY_RUN_CHECKS))
def test_dry_run_checks_the_composed_recipe(name, capsys, fx, model_path):
    recipe, env, args, msg = DRY_RUN_CHECKS[name]
    rc = launch.main([recipe, *args], sdpa_off(MODEL=model_path, DRY_RUN="1", **{**recipe_files(fx, recipe), **env}))
    out = capsys.readouterr().out
    if msg is None:
        assert rc == 0 and f"[launch] config OK: recipe {recipe} " in out, out
    else:
        assert rc == 2 and "[launch] CONFIG ERROR: " in out and msg in out, out


def test_unknown_recipe_and_bad_override(capsys):
    assert launch.main(["no_such_recipe"], base_env()) == 2
    assert "recipe 'no_such_recipe': no config.yaml in " in capsys.readouterr().out
    assert launch.main(["gsm8k_rule", "trainer.save_freqq=3"], base_env(DRY_RUN="print")) == 2
    c = capsys.readouterr()
    assert "[launch] ERROR: unknown key 'trainer.save_freqq': not in verl's ppo_trainer schema" in c.out + c.err


# ----------------------------------------------------------------------------------------------- one place
def _leaves(node, prefix=""):
    out = {}
    for k, v in node.items():
        if isinstance(v, dict) and v:
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_each_default_is_written_once():
    """A recipe's config.yaml repeats no base.yaml value, and no config repeats llm_judge's own defaults."""
    import dataclasses

    import yaml

    from reward_fns import judge_service
    from reward_fns.judge_options import PointwiseSettings

    base = _leaves(yaml.safe_load(open(os.path.join(ROOT, "recipes", "base.yaml"))))
    judge = {f.name: f.default for f in dataclasses.fields(PointwiseSettings)}
    judge.update(reward_router_address=None, reward_model_tokenizer=None)  # verl's arguments: never in a config
    judge["model"] = judge_service.DEFAULT_REMOTE_MODEL
    repeated = []
    for recipe in RECIPES:
        leaves = _leaves(yaml.safe_load(open(os.path.join(ROOT, "recipes", recipe, "config.yaml"))))
        groups = sorted(glob.glob(os.path.join(ROOT, "recipes", recipe, "*", "*.yaml")))  # config groups after _self_
        assert leaves.pop("defaults") == ["ppo_trainer", "base", "_self_"] + (
            [{"judge_placement": "colocated"}] if groups else []
        ), recipe
        sources = [(recipe, leaves)] + [
            (os.path.relpath(f, os.path.join(ROOT, "recipes")), _leaves(yaml.safe_load(open(f)))) for f in groups
        ]
        for where, found in sources:
            for key, value in found.items():
                if key == "defaults":
                    continue
                if key in base and base[key] == value:
                    repeated.append(f"{where}: {key}={value!r} is base.yaml's value")
                kw = key.removeprefix("reward.custom_reward_function.reward_kwargs.")
                if kw != key and kw in judge and judge[kw] == value:
                    repeated.append(f"{where}: {key}={value!r} is reward_fns/llm_judge.py's default")
    for key, value in base.items():
        kw = key.removeprefix("reward.custom_reward_function.reward_kwargs.")
        assert kw == key or kw not in judge, f"base.yaml sets llm_judge's {kw}"
    assert not repeated, "\n".join(repeated)


def test_the_launcher_holds_no_training_defaults():
    """The default learning rate (and every other training value) lives in the recipe configs only:
    changing the default is one line of recipes/base.yaml."""
    configs = {
        f: open(os.path.join(ROOT, f)).read()
        for f in [f"recipes/{r}/config.yaml" for r in RECIPES] + ["recipes/base.yaml"]
    }
    assert [f for f, text in configs.items() if re.search(r"^\s+lr: ", text, re.M)] == [
        "recipes/judge_pointwise/config.yaml",
        "recipes/judge_pairwise/config.yaml",
        "recipes/base.yaml",
    ]
    lrs = {m for text in configs.values() for m in re.findall(r"^\s+lr: (\S+)$", text, re.M)}
    launcher = [
        "scripts/launch/launcher.py",
        "scripts/launch.sh",
        "scripts/launch/knobs.py",
        "scripts/launch/defaults.py",
        "scripts/launch/ray_job.py",
        "scripts/launch/verl_config.py",
        "scripts/launch/config_checks.py",
        "scripts/launch/config_compose.py",
        "scripts/main.sh",
        "runtime_env.yaml",
    ]
    hits = [
        f
        for f in (*launcher, *[f"recipes/{r}/run.sh" for r in ALL_RECIPES])
        if any(lr in open(os.path.join(ROOT, f)).read() for lr in lrs)
    ]
    assert len(lrs) == 2 and hits == []
