"""scripts/launch/verl_config.py: overrides and recipe configs against verl 0.9.1's own ppo_trainer schema (CPU).

Table-driven: a known-good override set passes (and really lands in the composed config); each bad
case (typo key, legacy top-level reward keys, '+' additions outside the allowlist, deletions, missing
files, values out of range, unknown reward manager, verl's own validate_config) fails with the
expected message. Recipe configs: every recipe composes; a key a recipe's YAML adds that neither verl
nor recipes/base.yaml defines is an error naming it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import scripts
from scripts.launch import config_compose, verl_config

ROOT = scripts.ROOT
RECIPES = ["judge_pointwise", "judge_pairwise", "gsm8k_rule", "gsm8k_api_judge", "gsm8k_local_judge"]

pytest.importorskip("verl")


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("schema_data")
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {
                    "role": "user",
                    "content": "Natalia sold 48 clips in April and half as many in May. How many in total?",
                }
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": "72"},
            "extra_info": {"split": "train", "index": 0, "question": "q", "answer": "#### 72"},
        }
    ] * 16  # one batch (data.train_batch_size=16): the config check refuses fewer rows
    for name in ("train.parquet", "test.parquet"):
        pq.write_table(pa.Table.from_pylist(rows), str(d / name))
    for label in ("4", "A"):  # the judge recipes' labels: pointwise 0-4, pairwise A/B (the config check reads them)
        judged = [{**r, "reward_model": {"style": "rule", "ground_truth": label}} for r in rows]
        for name in ("train", "test"):
            pq.write_table(pa.Table.from_pylist(judged), str(d / f"{name}_{label}.parquet"))
    return str(d / "train.parquet"), str(d / "test.parquet")


def files_of(recipe: str, data_files) -> tuple[str, str]:
    """``data_files`` with the labels ``recipe``'s reward reads: GSM8K's, or a judge's (pointwise 4, pairwise A)."""
    label = {"judge_pointwise": "4", "judge_pairwise": "A"}.get(recipe)
    return data_files if label is None else tuple(f.replace(".parquet", f"_{label}.parquet") for f in data_files)


# The known-good set of overrides (one H100, SmolLM2-135M, GRPO n=4, batch 16, no flash-attn)
# plus our reward function.
GOOD = """
algorithm.adv_estimator=grpo
data.train_batch_size=16
data.max_prompt_length=256
data.max_response_length=256
data.filter_overlong_prompts=True
data.truncation=error
data.dataloader_num_workers=0
actor_rollout_ref.model.use_remove_padding=False
+actor_rollout_ref.model.override_config.attn_implementation=sdpa
actor_rollout_ref.model.enable_gradient_checkpointing=False
actor_rollout_ref.actor.optim.lr=1e-6
actor_rollout_ref.actor.ppo_mini_batch_size=16
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
actor_rollout_ref.actor.use_kl_loss=True
actor_rollout_ref.actor.kl_loss_coef=0.001
actor_rollout_ref.actor.kl_loss_type=low_var_kl
actor_rollout_ref.actor.entropy_coeff=0
actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8
actor_rollout_ref.rollout.name=vllm
actor_rollout_ref.rollout.n=4
actor_rollout_ref.rollout.tensor_model_parallel_size=1
actor_rollout_ref.rollout.gpu_memory_utilization=0.4
actor_rollout_ref.rollout.enforce_eager=True
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
actor_rollout_ref.rollout.agent.num_workers=2
reward.num_workers=2
reward.custom_reward_function.path=pkg://reward_fns.gsm8k
reward.custom_reward_function.name=compute_score
+reward.custom_reward_function.reward_kwargs.mode=flexible
trainer.n_gpus_per_node=1
trainer.nnodes=1
trainer.total_training_steps=3
trainer.logger=[console,file]
trainer.val_before_train=False
trainer.save_freq=-1
""".split()


@pytest.fixture(scope="module")
def good(model_path, data_files):
    train, val = data_files
    return [f"actor_rollout_ref.model.path={model_path}", f"data.train_files={train}", f"data.val_files={val}", *GOOD]


def replace(overrides, key, new):
    """Drop the override for `key` and append `new` (None: only drop)."""
    out = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]
    return out + ([new] if new else [])


def test_good_override_set_passes_and_lands(good):
    cfg = verl_config.check(good)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.reward.custom_reward_function.path == "pkg://reward_fns.gsm8k"
    assert cfg.reward.custom_reward_function.reward_kwargs.mode == "flexible"
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert list(cfg.trainer.logger) == ["console", "file"]
    # the legacy top-level reward sections stay empty
    assert cfg.custom_reward_function.path is None and cfg.reward_model.enable is None


@pytest.mark.parametrize(
    "extra",
    [
        [
            "+reward.max_concurrent=8",
            "+reward.max_rpm=60",
            "+reward.max_tpm=10000",
            "reward.reward_manager.name=rate_limited",
        ],
        [
            "+reward.custom_reward_function.reward_kwargs.base_url=http://127.0.0.1:8000/v1",
            "+reward.custom_reward_function.reward_kwargs.api_key_env=OPENAI_API_KEY",
        ],
        ["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=/tmp/m.jsonl"],
        [
            "reward.reward_model.enable=True",
            "reward.reward_model.rollout.name=vllm",
            "reward.reward_model.rollout.tensor_model_parallel_size=1",
            "reward.reward_model.enable_resource_pool=True",
            "reward.reward_model.n_gpus_per_node=1",
            "reward.reward_model.nnodes=1",
        ],
        ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm", "trainer.use_v1=False"],
    ],
    ids=["rate_limited", "judge_kwargs", "ray_env", "local_judge_pool", "local_judge_colocated_legacy"],
)
def test_allowed_additions_and_reward_sections_pass(good, model_path, extra):
    if "reward.reward_model.enable=True" in extra:
        extra = extra + [f"reward.reward_model.model_path={model_path}"]
    verl_config.check(good + extra)


# name -> (transform of the good set, expected message fragment)
BAD = {
    "typo_key": (lambda g: g + ["algorithm.adv_estimatr=grpo"], "unknown key 'algorithm.adv_estimatr'"),
    "typo_nested_key": (lambda g: g + ["trainer.save_freqq=5"], "unknown key 'trainer.save_freqq'"),
    "typo_reward_key": (
        lambda g: g + ["reward.custom_reward_function.pth=x.py"],
        "unknown key 'reward.custom_reward_function.pth'",
    ),
    "legacy_custom_reward_function": (
        lambda g: g + ["custom_reward_function.path=reward_fns/gsm8k.py"],
        "legacy reward key 'custom_reward_function.path'",
    ),
    "legacy_reward_model_enable": (
        lambda g: g + ["reward_model.enable=True"],
        "legacy reward key 'reward_model.enable'",
    ),
    "legacy_reward_model_path": (
        lambda g: g + ["reward_model.model.path=/m"],
        "legacy reward key 'reward_model.model.path'",
    ),
    "legacy_sandbox_fusion": (lambda g: g + ["sandbox_fusion.url=http://x"], "legacy reward key 'sandbox_fusion.url'"),
    "legacy_plus_kwargs": (
        lambda g: g + ["+custom_reward_function.reward_kwargs.mode=x"],
        "legacy reward key 'custom_reward_function.reward_kwargs.mode'",
    ),
    "unallowed_plus_top": (lambda g: g + ["+foo=1"], "adds key 'foo'"),
    "unallowed_plus_nested": (lambda g: g + ["+trainer.my_setting=1"], "adds key 'trainer.my_setting'"),
    "unallowed_force_add": (
        lambda g: g + ["++actor_rollout_ref.actor.my_knob=2"],
        "adds key 'actor_rollout_ref.actor.my_knob'",
    ),
    "deletion": (lambda g: g + ["~trainer.logger"], "deleting keys is not allowed"),
    "missing_model": (
        lambda g: replace(g, "actor_rollout_ref.model.path", "actor_rollout_ref.model.path=/nonexistent/model"),
        "actor_rollout_ref.model.path: model folder not found: /nonexistent/model",
    ),
    "missing_train_file": (
        lambda g: replace(g, "data.train_files", "data.train_files=/nonexistent/train.parquet"),
        "data.train_files: file not found: /nonexistent/train.parquet",
    ),
    "missing_val_file_in_list": (
        lambda g: replace(g, "data.val_files", "data.val_files=[/nonexistent/a.parquet]"),
        "data.val_files: file not found: /nonexistent/a.parquet",
    ),
    "missing_reward_file": (
        lambda g: replace(
            g, "reward.custom_reward_function.path", "reward.custom_reward_function.path=/nonexistent/reward.py"
        ),
        "reward function file/module not found: /nonexistent/reward.py",
    ),
    "missing_reward_module": (
        lambda g: replace(
            g,
            "reward.custom_reward_function.path",
            "reward.custom_reward_function.path=pkg://reward_fns.no_such_module",
        ),
        "reward function file/module not found: pkg://reward_fns.no_such_module",
    ),
    "missing_reward_fn_name": (
        lambda g: replace(g, "reward.custom_reward_function.name", "reward.custom_reward_function.name=no_such_fn"),
        "'no_such_fn' is not defined",
    ),
    "unregistered_reward_manager": (
        lambda g: g + ["reward.reward_manager.name=no_such_manager"],
        "'no_such_manager' is not a registered reward manager",
    ),
    "local_judge_without_model": (
        lambda g: g + ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm"],
        "reward.reward_model.model_path is not set",
    ),
    "colocated_judge_on_v1": (
        lambda g: (
            g
            + [
                "reward.reward_model.enable=True",
                "reward.reward_model.rollout.name=vllm",
                "reward.reward_model.model_path=/tmp",
                "trainer.use_v1=True",
            ]
        ),
        "trainer.use_v1=False",
    ),
    "verl_validate_config": (
        lambda g: g + ["actor_rollout_ref.rollout.log_prob_micro_batch_size=8"],
        "verl validate_config",
    ),
    "bad_override_syntax": (lambda g: g + ["trainer.logger=[console"], "cannot parse overrides"),
    # values verl does not check itself: each passed as "CONFIG OK" (or crashed verl) before
    "n_gpus_negative": (
        lambda g: replace(g, "trainer.n_gpus_per_node", "trainer.n_gpus_per_node=-1"),
        "trainer.n_gpus_per_node=-1: must be an integer >= 1",
    ),
    "n_gpus_zero": (
        lambda g: replace(g, "trainer.n_gpus_per_node", "trainer.n_gpus_per_node=0"),
        "trainer.n_gpus_per_node=0: must be an integer >= 1",
    ),
    "n_gpus_fraction": (
        lambda g: replace(g, "trainer.n_gpus_per_node", "trainer.n_gpus_per_node=1.5"),
        "trainer.n_gpus_per_node=1.5: must be an integer >= 1",
    ),
    "nnodes_zero": (
        lambda g: replace(g, "trainer.nnodes", "trainer.nnodes=0"),
        "trainer.nnodes=0: must be an integer >= 1",
    ),
    "judge_pool_zero_gpus": (
        lambda g: (
            g
            + [
                "reward.reward_model.enable=True",
                "reward.reward_model.rollout.name=vllm",
                "reward.reward_model.model_path=/tmp",
                "reward.reward_model.enable_resource_pool=True",
                "reward.reward_model.n_gpus_per_node=0",
                "reward.reward_model.nnodes=1",
            ]
        ),
        "reward.reward_model.n_gpus_per_node=0: must be an integer >= 1",
    ),
    "temperature_negative": (
        lambda g: g + ["actor_rollout_ref.rollout.temperature=-1"],
        "actor_rollout_ref.rollout.temperature=-1: must be a number >= 0",
    ),
    "val_temperature_negative": (
        lambda g: g + ["actor_rollout_ref.rollout.val_kwargs.temperature=-0.5"],
        "actor_rollout_ref.rollout.val_kwargs.temperature=-0.5: must be a number >= 0",
    ),
    "gpu_mem_over_one": (
        lambda g: replace(
            g,
            "actor_rollout_ref.rollout.gpu_memory_utilization",
            "actor_rollout_ref.rollout.gpu_memory_utilization=1.5",
        ),
        "actor_rollout_ref.rollout.gpu_memory_utilization=1.5: must be a number in (0, 1]",
    ),
    "gpu_mem_zero": (
        lambda g: replace(
            g, "actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.gpu_memory_utilization=0"
        ),
        "actor_rollout_ref.rollout.gpu_memory_utilization=0: must be a number in (0, 1]",
    ),
    "judge_gpu_mem_over_one": (
        lambda g: (
            g
            + [
                "reward.reward_model.enable=True",
                "reward.reward_model.rollout.name=vllm",
                "reward.reward_model.model_path=/tmp",
                "trainer.use_v1=False",
                "reward.reward_model.rollout.gpu_memory_utilization=2",
            ]
        ),
        "reward.reward_model.rollout.gpu_memory_utilization=2: must be a number in (0, 1]",
    ),
    "lr_zero": (
        lambda g: replace(g, "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.optim.lr=0"),
        "actor_rollout_ref.actor.optim.lr=0: must be a number > 0",
    ),
    "lr_text": (
        lambda g: replace(g, "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.optim.lr=fast"),
        "actor_rollout_ref.actor.optim.lr='fast': must be a number > 0",
    ),
    "train_batch_zero": (
        lambda g: replace(g, "data.train_batch_size", "data.train_batch_size=0"),
        "data.train_batch_size=0: must be an integer >= 1",
    ),
    "mini_batch_zero": (
        lambda g: replace(
            g, "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size=0"
        ),
        "actor_rollout_ref.actor.ppo_mini_batch_size=0: must be an integer >= 1",
    ),
    "micro_batch_negative": (
        lambda g: replace(
            g,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-8",
        ),
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=-8: must be an integer >= 1",
    ),
    "rollout_n_zero": (
        lambda g: replace(g, "actor_rollout_ref.rollout.n", "actor_rollout_ref.rollout.n=0"),
        "actor_rollout_ref.rollout.n=0: must be an integer >= 1",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_cases_fail_with_message(good, name):
    transform, expected = BAD[name]
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(transform(list(good)))
    text = str(ei.value)
    assert expected in text, text


def test_value_rules_accept_the_edges(good):
    """The bounds themselves are valid: memory share 1, temperature 0, one GPU, batch 1; an optional size unset."""
    ok = replace(
        good, "actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.gpu_memory_utilization=1"
    )
    ok = replace(ok, "data.train_batch_size", "data.train_batch_size=1")
    ok = replace(ok, "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size=1")
    ok = replace(
        ok,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    )
    for key in (
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    ):
        ok = replace(ok, key, f"{key}=4")  # a step's 1 x 4 samples
    cfg = verl_config.check(ok + ["actor_rollout_ref.rollout.temperature=0", "data.val_batch_size=null"])
    assert (
        cfg.actor_rollout_ref.rollout.gpu_memory_utilization,
        cfg.actor_rollout_ref.rollout.temperature,
        cfg.trainer.n_gpus_per_node,
        cfg.data.train_batch_size,
        cfg.data.val_batch_size,
    ) == (1, 0, 1, 1, None)


def test_value_errors_reported_together_before_verl_runs(good):
    """Every out-of-range value at once, and verl's own checks (which divide by the GPU count) not reached."""
    bad = replace(good, "trainer.n_gpus_per_node", "trainer.n_gpus_per_node=0") + ["actor_rollout_ref.rollout.n=0"]
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(bad)
    assert ei.value.errors == [
        "trainer.n_gpus_per_node=0: must be an integer >= 1",
        "actor_rollout_ref.rollout.n=0: must be an integer >= 1",
    ]


@pytest.mark.parametrize(
    "extra, errors",
    [
        ([], []),
        # two GPUs: the actor's mini-batch of 16 x 4 is 32 a GPU; micro-batches of 8 divide it
        (["trainer.n_gpus_per_node=2"], []),
        (
            ["trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64"],
            [
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64 does not divide the actor's mini-batch "
                "(16 x 4) over "
                "2 GPU(s) = 32 a GPU: verl would stop at its first update; use a divisor of that"
            ],
        ),
        (
            [
                "trainer.n_gpus_per_node=2",
                "trainer.nnodes=2",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32",
            ],
            [
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 does not divide a step's samples "
                "(16 x 4) over "
                "4 GPU(s) = 16 a GPU: verl would stop at its first update; use a divisor of that"
            ],
        ),
        # dynamic batch sizes: verl packs by tokens, no micro-batch size applies
        (
            [
                "trainer.n_gpus_per_node=2",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64",
                "actor_rollout_ref.actor.use_dynamic_bsz=True",
            ],
            [],
        ),
    ],
)
def test_micro_batches_must_divide_each_gpus_share(good, extra, errors):
    """Found on two GPUs: micro-batches of 64 and a mini-batch of 8 x 8 samples pass every verl check on CPU, then
    stop the run at its first update after minutes of start-up."""
    overrides = [o for o in good if o.split("=", 1)[0] not in {e.split("=", 1)[0] for e in extra}] + extra
    if errors:
        with pytest.raises(config_compose.ConfigError) as ei:
            verl_config.check(overrides, paths="off")
        assert ei.value.errors == errors
    else:
        verl_config.check(overrides, paths="off")


# recipe -> (data set the launcher builds, lr, rollout n, reward function, reward manager, reward model, experiment);
# BASE: the recipe keeps recipes/base.yaml's value (written there only)
BASE = object()
RECIPE_VALUES = {
    "judge_pointwise": ("verify_pointwise", 2e-6, 8, "pkg://reward_fns.pointwise", "naive", False, "judge_pointwise"),
    "judge_pairwise": ("verify_pairwise", 2e-6, 8, "pkg://reward_fns.pairwise", "naive", False, "judge_pairwise"),
    "gsm8k_rule": ("gsm8k", BASE, BASE, "pkg://reward_fns.gsm8k", "naive", False, "gsm8k_rule"),
    "gsm8k_api_judge": ("gsm8k", BASE, BASE, "pkg://reward_fns.llm_judge", "rate_limited", False, "gsm8k_api_judge"),
    "gsm8k_local_judge": ("gsm8k", BASE, BASE, "pkg://reward_fns.llm_judge", "naive", True, "gsm8k_local_judge"),
}


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_configs_pass(recipe, model_path, data_files):
    from omegaconf import OmegaConf

    train, val = files_of(recipe, data_files)
    cfg = verl_config.check(
        [f"actor_rollout_ref.model.path={model_path}", f"data.train_files={train}", f"data.val_files={val}"],
        recipe=recipe,
    )
    base = OmegaConf.load(os.path.join(ROOT, "recipes", "base.yaml"))
    keys = (
        "verl_judge.default_data",
        "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.rollout.n",
        "reward.custom_reward_function.path",
        "reward.reward_manager.name",
        "reward.reward_model.enable",
        "trainer.experiment_name",
    )
    want = tuple(OmegaConf.select(base, k) if v is BASE else v for k, v in zip(keys, RECIPE_VALUES[recipe]))
    assert tuple(OmegaConf.select(cfg, k) for k in keys) == want
    assert cfg.trainer.use_v1 is False and cfg.algorithm.adv_estimator == "grpo"


@pytest.fixture
def recipe_copy(tmp_path):
    """A copy of recipes/gsm8k_rule in a folder of its own (its defaults still find verl and base.yaml)."""
    d = tmp_path / "my_recipe"
    d.mkdir()
    shutil.copy(os.path.join(ROOT, "recipes", "gsm8k_rule", "config.yaml"), d / "config.yaml")
    return d


# YAML appended to the copy -> the key the checker must name (None: passes)
RECIPE_YAML = {
    "typo_in_trainer": ("trainer:\n  save_freqq: 5\n", "unknown key 'trainer.save_freqq'"),
    "typo_in_verl_judge": ("verl_judge:\n  pair_group: true\n", "unknown key 'verl_judge.pair_group'"),
    "new_top_level_section": ("my_section:\n  x: 1\n", "unknown key 'my_section.x'"),
    "allowed_addition": ("reward:\n  max_rpm: 600\n", None),
    "declared_verl_judge_key": ("verl_judge:\n  pair_groups: true\n", None),
    "legacy_reward_section": ("custom_reward_function:\n  path: x.py\n", "legacy top-level 'custom_reward_function'"),
}


@pytest.mark.parametrize("name", list(RECIPE_YAML))
def test_recipe_yaml_keys_are_checked(name, recipe_copy, model_path, data_files):
    import yaml

    extra, expected = RECIPE_YAML[name]
    cfg_file = recipe_copy / "config.yaml"
    doc = yaml.safe_load(cfg_file.read_text())
    for section, values in yaml.safe_load(extra).items():
        doc.setdefault(section, {}).update(values)
    cfg_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        f"data.train_files={data_files[0]}",
        f"data.val_files={data_files[1]}",
    ]
    if expected is None:
        verl_config.check(overrides, recipe=str(recipe_copy))
        return
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(overrides, recipe=str(recipe_copy))
    assert any(expected in e for e in ei.value.errors), ei.value.errors


def test_the_checker_composes_as_the_trainer_does(model_path, data_files):
    """python -m scripts.train --cfg job --resolve prints the config config_compose.compose checks (same search path,
    same resolvers, the knobs read from the environment)."""
    import yaml
    from omegaconf import OmegaConf

    from scripts.launch import knobs

    overrides = [
        f"data.train_files={data_files[0]}",
        f"data.val_files={data_files[1]}",
        "trainer.total_training_steps=2",
    ]
    env = {**os.environ, "PYTHONPATH": ROOT, "MODEL": model_path, "N_GPUS": "2", "NO_FLASH_ATTN": "1"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.train",
            "--config-path",
            os.path.join(ROOT, "recipes", "gsm8k_rule"),
            "--config-name",
            "config",
            "--cfg",
            "job",
            "--resolve",
            *overrides,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    with knobs.environ(env):
        checked = OmegaConf.to_container(config_compose.compose(overrides, "gsm8k_rule"), resolve=True)
    trained = yaml.safe_load(r.stdout)
    assert trained == checked
    assert (
        trained["trainer"]["n_gpus_per_node"],
        trained["actor_rollout_ref"]["model"]["path"],
        trained["actor_rollout_ref"]["model"]["override_config"]["attn_implementation"],
    ) == (2, model_path, "sdpa")


def test_paths_warn_and_off(good):
    bad = replace(good, "data.train_files", "data.train_files=/nonexistent/train.parquet")
    notes: list[str] = []
    verl_config.check(bad, paths="warn", notes=notes)
    assert any("/nonexistent/train.parquet" in n for n in notes)
    verl_config.check(bad, paths="off")


def test_all_problems_reported_at_once(good):
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(good + ["reward_model.enable=True", "+foo=1", "custom_reward_function.name=x"])
    assert len(ei.value.errors) == 3


def test_cli(good, tmp_path, capsys):
    """--help and a good set through main in-process; a bad set through python -m, as a user runs it."""
    with pytest.raises(SystemExit) as ei:
        verl_config.main(["--help"])
    h = capsys.readouterr().out
    assert "--recipe" in h
    assert ei.value.code == 0 and "--paths" in h and "override_config" in h
    f = tmp_path / "overrides.txt"
    f.write_text("# good set\n" + "\n".join(good) + "\n")
    rc = verl_config.main(["--overrides-file", str(f), "--show", "algorithm.adv_estimator"])
    ok = capsys.readouterr()
    assert rc == 0, ok.err
    assert "CONFIG OK" in ok.out and "algorithm.adv_estimator = grpo" in ok.out
    # recipes/README.md's form: overrides after --show KEY ... are overrides, not keys to show
    rc = verl_config.main(["--overrides-file", str(f), "--show", "algorithm.adv_estimator", "algorithm.gamma=0.5"])
    shown = capsys.readouterr()
    assert rc == 0, shown.err
    assert shown.out.splitlines()[:1] == ["algorithm.adv_estimator = grpo"]
    assert f"CONFIG OK: {len(good) + 1} overrides compose" in shown.out and "gamma" not in shown.out
    env = {**os.environ, "PYTHONPATH": ROOT}
    script = ["-m", "scripts.launch.verl_config"]
    bad = subprocess.run(
        [sys.executable, *script, "--overrides-file", str(f), "reward_model.enable=True", "+foo=1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert bad.returncode == 1
    assert bad.stderr.count("CONFIG ERROR:") == 2 and "legacy reward key 'reward_model.enable'" in bad.stderr


# Audit D8: values a dry run passed that stop a real run at the first reward call (reward_kwargs the reward function
# refuses, asked of its module's check_options) or when the trainer installs its hooks (verl_judge settings).
# (recipe, overrides, the checker's errors)
KW, LLM = (
    "+reward.custom_reward_function.reward_kwargs.",
    "reward.custom_reward_function.reward_kwargs (pkg://reward_fns.llm_judge): ",
)
D8_CASES = [
    ("gsm8k_api_judge", [KW + "mode=bogus"], [LLM + "mode must be one of ('judge', 'hybrid', 'route'), got 'bogus'"]),
    ("gsm8k_local_judge", [KW + "mode=bogus"], [LLM + "mode must be one of ('judge', 'hybrid', 'route'), got 'bogus'"]),
    (
        "gsm8k_api_judge",
        [KW + "modee=judge"],
        [
            LLM + "llm_judge.compute_score: unknown option(s) ['modee'] ('modee': did you mean 'mode'?); known: "
            "['api_key_env', 'base_url', 'cache_size', 'cache_ttl', 'canary_every', 'deadline', 'extra_body', "
            "'fallback', 'grounded', 'judge_failure', 'max_concurrency', 'max_response_bytes', 'max_response_chars', "
            "'max_retries', 'max_tokens', 'mode', 'model', 'parse_fail_score', 'prompt', 'prompt_version', "
            "'rule_mode', 'temperature', 'timeout']"
        ],
    ),
    (
        "gsm8k_api_judge",
        [KW + "judge_failure=skip", KW + "rule_mode=bogus"],
        [
            LLM + "judge_failure must be 'fallback' or 'abstain', got 'skip'",
            LLM + "rule_mode must be one of ('strict', 'flexible'), got 'bogus'",
        ],
    ),
    ("gsm8k_api_judge", [KW + "fallback=rulez"], [LLM + "fallback must be 'rule' or a number, got 'rulez'"]),
    (
        "gsm8k_api_judge",
        [KW + "parse_fail_score=0.9"],
        [
            LLM + "parse_fail_score=0.9 is above the reward of the lowest real verdict in mode 'judge' (0.0): "
            "a policy would "
            "learn to break the judge's reply"
        ],
    ),
    ("gsm8k_api_judge", [KW + "timeout=-5"], [LLM + "timeout must be a number > 0, got -5"]),
    ("gsm8k_api_judge", [KW + "max_concurrency=0"], [LLM + "max_concurrency must be a whole number >= 1, got 0"]),
    (
        "gsm8k_rule",
        [KW + "mode=bogus"],
        [
            "reward.custom_reward_function.reward_kwargs (pkg://reward_fns.gsm8k): "
            "mode must be one of ('strict', 'flexible'), "
            "got 'bogus'"
        ],
    ),
    (
        "judge_pairwise",
        [KW + "format_penalty=0"],
        [
            "reward.custom_reward_function.reward_kwargs (pkg://reward_fns.pairwise): "
            "format_penalty must be < 0 (below every "
            "well-formed reward), got 0"
        ],
    ),
    ("gsm8k_rule", ["verl_judge.fail_fast.threshold=2"], ["verl_judge.fail_fast.threshold must be in [0, 1], got 2"]),
    ("gsm8k_rule", ["verl_judge.fail_fast.steps=0"], ["verl_judge.fail_fast.steps must be >= 1, got 0"]),
    (
        "gsm8k_rule",
        ["verl_judge.hacking_watch.window=1"],
        ["verl_judge.hacking_watch.window must be >= 3 steps, got 1"],
    ),
    # valid options still pass
    ("gsm8k_api_judge", [KW + "mode=hybrid", KW + "parse_fail_score=0.5", KW + "judge_failure=abstain"], []),
    ("gsm8k_api_judge", [KW + "mode=route", KW + "prompt_version=v2", KW + "fallback=0"], []),
    ("gsm8k_rule", [KW + "mode=flexible", "verl_judge.fail_fast.threshold=1"], []),
    ("judge_pointwise", [KW + "format_penalty=-0.5"], []),
]


@pytest.mark.parametrize("recipe, extra, errors", D8_CASES)
def test_d8_values_a_run_refuses_fail_the_check(recipe, extra, errors, model_path, data_files):
    train, val = files_of(recipe, data_files)
    overrides = [f"actor_rollout_ref.model.path={model_path}", f"data.train_files={train}", f"data.val_files={val}"]
    overrides += extra
    if not errors:
        verl_config.check(overrides, recipe=recipe)
        return
    with pytest.raises(config_compose.ConfigError) as ei:
        verl_config.check(overrides, recipe=recipe)
    assert ei.value.errors == errors


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "bogus"},
        {"modee": "judge"},
        {"judge_failure": "skip", "rule_mode": "x"},
        {"fallback": "rulez"},
        {"parse_fail_score": 0.9},
        {"mode": "hybrid", "fallback": "nan"},
    ],
)
def test_d8_check_options_says_what_compute_score_raises(kwargs):
    """One home for each rule: the config check's messages are the ValueError the reward function raises at a call."""
    import asyncio

    from reward_fns import llm_judge

    found = llm_judge.check_options(**kwargs)
    with pytest.raises(ValueError) as ei:
        asyncio.run(llm_judge.compute_score("openai/gsm8k", "#### 7", "7", {}, **kwargs))
    assert found and str(ei.value) == "; ".join(found)


def test_d8_dry_run_stops_on_a_bad_reward_option(model_path, data_files, tmp_path, capsys):
    """The launcher's dry run (its main, in-process) stops on a reward option the reward function refuses."""
    from scripts.launch import launcher

    env = {
        **os.environ,
        "DRY_RUN": "1",
        "MODEL": model_path,
        "TRAIN_FILES": data_files[0],
        "VAL_FILES": data_files[1],
        "OUTPUT_DIR": str(tmp_path),
    }
    rc = launcher.main(["gsm8k_api_judge", "+reward.custom_reward_function.reward_kwargs.mode=bogus"], env)
    out = capsys.readouterr().out
    assert rc == 2, out
    lines = out.splitlines()
    assert f"[launch] CONFIG ERROR: {LLM}mode must be one of ('judge', 'hybrid', 'route'), got 'bogus'" in lines
    assert lines[-1] == "[launch] ERROR: 1 setting(s) out of range or unresolvable; nothing was started"


@pytest.mark.parametrize(
    "override, message",
    [
        (  # an allow-listed addition written without its +: say how to add it
            "reward.custom_reward_function.reward_kwargs.mode=route",
            "'reward.custom_reward_function.reward_kwargs.mode' is not in verl's ppo_trainer schema, so it must be "
            "added: +reward.custom_reward_function.reward_kwargs.mode=... adds it, "
            "++reward.custom_reward_function.reward_kwargs.mode=... adds or replaces it",
        ),
        (  # anything else: a typo
            "trainer.total_trainig_steps=3",
            "unknown key 'trainer.total_trainig_steps': not in verl's ppo_trainer schema (check the spelling)",
        ),
    ],
)
def test_a_key_verl_does_not_know_names_the_fix(override, message):
    with pytest.raises(config_compose.ConfigError) as e:
        config_compose.compose([override], "gsm8k_api_judge")
    assert e.value.errors == [message]
