"""scripts/verl_config.py: our overrides against verl 0.9.1's own ppo_trainer schema (CPU).

Table-driven: a known-good override set passes (and really lands in the composed config); each bad
case (typo key, legacy top-level reward keys, '+' additions outside the allowlist, deletions, missing
files, unknown reward manager, verl's own validate_config) fails with the expected message.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import verl_config  # noqa: E402

pytest.importorskip("verl")


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("schema_data")
    rows = [{
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": "Natalia sold 48 clips in April and half as many in May. How many in total?"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {"split": "train", "index": 0, "question": "q", "answer": "#### 72"},
    }]
    for name in ("train.parquet", "test.parquet"):
        pq.write_table(pa.Table.from_pylist(rows), str(d / name))
    return str(d / "train.parquet"), str(d / "test.parquet")


# The known-good set (one H100, SmolLM2-135M, GRPO n=4, batch 16): shared/hooks/device/ctl/overrides.txt
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


@pytest.mark.parametrize("extra", [
    ["+reward.max_concurrent=8", "+reward.max_rpm=60", "+reward.max_tpm=10000", "reward.reward_manager.name=rate_limited"],
    ["+reward.custom_reward_function.reward_kwargs.base_url=http://127.0.0.1:8000/v1",
     "+reward.custom_reward_function.reward_kwargs.api_key_env=OPENAI_API_KEY"],
    ["+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=/tmp/m.jsonl"],
    ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm",
     "reward.reward_model.rollout.tensor_model_parallel_size=1", "reward.reward_model.enable_resource_pool=True",
     "reward.reward_model.n_gpus_per_node=1", "reward.reward_model.nnodes=1"],
    ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm", "trainer.use_v1=False"],
], ids=["rate_limited", "judge_kwargs", "ray_env", "local_judge_pool", "local_judge_colocated_legacy"])
def test_allowed_additions_and_reward_sections_pass(good, model_path, extra):
    if "reward.reward_model.enable=True" in extra:
        extra = extra + [f"reward.reward_model.model_path={model_path}"]
    verl_config.check(good + extra)


# name -> (transform of the good set, expected message fragment)
BAD = {
    "typo_key": (lambda g: g + ["algorithm.adv_estimatr=grpo"], "unknown key 'algorithm.adv_estimatr'"),
    "typo_nested_key": (lambda g: g + ["trainer.save_freqq=5"], "unknown key 'trainer.save_freqq'"),
    "typo_reward_key": (lambda g: g + ["reward.custom_reward_function.pth=x.py"], "unknown key 'reward.custom_reward_function.pth'"),
    "legacy_custom_reward_function": (lambda g: g + ["custom_reward_function.path=reward_fns/gsm8k.py"],
                                      "legacy reward key 'custom_reward_function.path'"),
    "legacy_reward_model_enable": (lambda g: g + ["reward_model.enable=True"], "legacy reward key 'reward_model.enable'"),
    "legacy_reward_model_path": (lambda g: g + ["reward_model.model.path=/m"], "legacy reward key 'reward_model.model.path'"),
    "legacy_sandbox_fusion": (lambda g: g + ["sandbox_fusion.url=http://x"], "legacy reward key 'sandbox_fusion.url'"),
    "legacy_plus_kwargs": (lambda g: g + ["+custom_reward_function.reward_kwargs.mode=x"],
                           "legacy reward key 'custom_reward_function.reward_kwargs.mode'"),
    "unallowed_plus_top": (lambda g: g + ["+foo=1"], "adds key 'foo'"),
    "unallowed_plus_nested": (lambda g: g + ["+trainer.my_setting=1"], "adds key 'trainer.my_setting'"),
    "unallowed_force_add": (lambda g: g + ["++actor_rollout_ref.actor.my_knob=2"], "adds key 'actor_rollout_ref.actor.my_knob'"),
    "deletion": (lambda g: g + ["~trainer.logger"], "deleting keys is not allowed"),
    "missing_model": (lambda g: replace(g, "actor_rollout_ref.model.path", "actor_rollout_ref.model.path=/nonexistent/model"),
                      "actor_rollout_ref.model.path: model folder not found: /nonexistent/model"),
    "missing_train_file": (lambda g: replace(g, "data.train_files", "data.train_files=/nonexistent/train.parquet"),
                           "data.train_files: file not found: /nonexistent/train.parquet"),
    "missing_val_file_in_list": (lambda g: replace(g, "data.val_files", "data.val_files=[/nonexistent/a.parquet]"),
                                 "data.val_files: file not found: /nonexistent/a.parquet"),
    "missing_reward_file": (lambda g: replace(g, "reward.custom_reward_function.path",
                                              "reward.custom_reward_function.path=/nonexistent/reward.py"),
                            "reward function file/module not found: /nonexistent/reward.py"),
    "missing_reward_module": (lambda g: replace(g, "reward.custom_reward_function.path",
                                                "reward.custom_reward_function.path=pkg://reward_fns.no_such_module"),
                              "reward function file/module not found: pkg://reward_fns.no_such_module"),
    "missing_reward_fn_name": (lambda g: replace(g, "reward.custom_reward_function.name", "reward.custom_reward_function.name=no_such_fn"),
                               "'no_such_fn' is not defined"),
    "unregistered_reward_manager": (lambda g: g + ["reward.reward_manager.name=no_such_manager"],
                                    "'no_such_manager' is not a registered reward manager"),
    "local_judge_without_model": (lambda g: g + ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm"],
                                  "reward.reward_model.model_path is not set"),
    "colocated_judge_on_v1": (lambda g: g + ["reward.reward_model.enable=True", "reward.reward_model.rollout.name=vllm",
                                             "reward.reward_model.model_path=/tmp", "trainer.use_v1=True"],
                              "trainer.use_v1=False"),
    "verl_validate_config": (lambda g: g + ["actor_rollout_ref.rollout.log_prob_micro_batch_size=8"],
                             "verl validate_config"),
    "bad_override_syntax": (lambda g: g + ["trainer.logger=[console"], "cannot parse overrides"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_cases_fail_with_message(good, name):
    transform, expected = BAD[name]
    with pytest.raises(verl_config.ConfigError) as ei:
        verl_config.check(transform(list(good)))
    text = str(ei.value)
    assert expected in text, text


def test_paths_warn_and_off(good):
    bad = replace(good, "data.train_files", "data.train_files=/nonexistent/train.parquet")
    notes: list[str] = []
    verl_config.check(bad, paths="warn", notes=notes)
    assert any("/nonexistent/train.parquet" in n for n in notes)
    verl_config.check(bad, paths="off")


def test_all_problems_reported_at_once(good):
    with pytest.raises(verl_config.ConfigError) as ei:
        verl_config.check(good + ["reward_model.enable=True", "+foo=1", "custom_reward_function.name=x"])
    assert len(ei.value.errors) == 3


def test_cli(good, tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    script = os.path.join(ROOT, "scripts", "verl_config.py")
    h = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert h.returncode == 0 and "--paths" in h.stdout and "override_config" in h.stdout
    f = tmp_path / "overrides.txt"
    f.write_text("# good set\n" + "\n".join(good) + "\n")
    ok = subprocess.run([sys.executable, script, "--overrides-file", str(f), "--show", "algorithm.adv_estimator"],
                        capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "CONFIG OK" in ok.stdout and "algorithm.adv_estimator = grpo" in ok.stdout
    bad = subprocess.run([sys.executable, script, "--overrides-file", str(f), "reward_model.enable=True", "+foo=1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 1
    assert bad.stderr.count("CONFIG ERROR:") == 2 and "legacy reward key 'reward_model.enable'" in bad.stderr
