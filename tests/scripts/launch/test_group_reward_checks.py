"""The config check of a group reward (scripts/launch/config_checks.group_reward_errors) on composed recipe configs:
the group reward manager needs ``reward.num_workers=1`` and reward_fns/pairwise_judge.py, a tournament needs a manager
that gathers a group; ``verl_judge.group_reward``'s defaults live in recipes/base.yaml and agree with
scripts/train/group_reward.py; recipes/gsm8k_api_judge's pairwise override sets pass DRY_RUN=1 through run.sh."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from scripts.launch import config_checks
from scripts.launch.config_compose import compose
from scripts.workflows import arms
from tests.scripts.launch.test_recipes import ROOT, base_env, fx, run_recipe  # noqa: F401  (fx: the fixture)

pytest.importorskip("verl")

PAIRWISE = "reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge"
TOURNAMENT = "++reward.custom_reward_function.reward_kwargs.mode=tournament"
WORKERS = (
    "reward.num_workers={n}: the group reward manager ({name}) needs reward.num_workers=1 (the answers of a GRPO "
    "group must reach one reward worker)"
)
NOT_PAIRWISE = (
    "reward.custom_reward_function.path={path}: the group reward manager ({name}) scores with "
    "reward_fns/pairwise_judge.py; set reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge"
)
UNGROUPED = (
    "reward.custom_reward_function.reward_kwargs.mode=tournament scores a whole GRPO group, which reward manager "
    "{name!r} (source register) cannot gather: set reward.reward_manager.source=importlib "
    "reward.reward_manager.name=GroupRewardManager reward.reward_manager.module.path=pkg://scripts.train.group_reward "
    "reward.num_workers=1"
)
REGISTERED = ["reward.reward_manager.name=pairwise_group", "reward.num_workers=1", PAIRWISE, TOURNAMENT]

CASES = {
    # (recipe, overrides) -> the messages, exactly
    "tournament_arm": ("gsm8k_local_judge", arms.TOURNAMENT, []),
    "tournament_arm_server": ("gsm8k_local_judge", ["judge_placement=server", *arms.TOURNAMENT], []),
    "tournament_api": ("gsm8k_api_judge", arms.TOURNAMENT, []),
    "pairwise_ref_arm": ("gsm8k_local_judge", arms.PAIRWISE_REF, []),
    "pairwise_ref_api": ("gsm8k_api_judge", arms.PAIRWISE_REF, []),
    "pairwise_ref_under_the_group_manager": (
        "gsm8k_api_judge",
        [*arms.PAIRWISE_REF, *arms.GROUP_MANAGER],
        [],
    ),
    "registered_name": ("gsm8k_api_judge", REGISTERED, []),
    "two_workers": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "reward.num_workers=2"],
        [WORKERS.format(n=2, name="GroupRewardManager")],
    ),
    "registered_two_workers": (
        "gsm8k_api_judge",
        [*REGISTERED, "reward.num_workers=2"],
        [WORKERS.format(n=2, name="pairwise_group")],
    ),
    "group_manager_over_llm_judge": (
        "gsm8k_local_judge",
        arms.GROUP_MANAGER,
        [NOT_PAIRWISE.format(path="pkg://reward_fns.llm_judge", name="GroupRewardManager")],
    ),
    "tournament_under_naive": ("gsm8k_local_judge", [PAIRWISE, TOURNAMENT], [UNGROUPED.format(name="naive")]),
    "tournament_under_rate_limited": (
        "gsm8k_api_judge",
        [PAIRWISE, TOURNAMENT, "reward.num_workers=1"],
        [UNGROUPED.format(name="rate_limited")],
    ),
    "tournament_under_an_other_module": (
        "gsm8k_api_judge",
        [
            PAIRWISE,
            TOURNAMENT,
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.name=GroupRewardManager",
            "reward.reward_manager.module.path=pkg://scripts.train.hooks",
        ],
        [
            "reward.custom_reward_function.reward_kwargs.mode=tournament scores a whole GRPO group, which reward "
            "manager 'GroupRewardManager' (source importlib) cannot gather: set reward.reward_manager.source=importlib "
            "reward.reward_manager.name=GroupRewardManager "
            "reward.reward_manager.module.path=pkg://scripts.train.group_reward reward.num_workers=1"
        ],
    ),
    "size_and_timeout": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=8", "verl_judge.group_reward.timeout=30.5"],
        [],
    ),
    "bad_size_and_timeout": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=0", "verl_judge.group_reward.timeout=0"],
        [
            "verl_judge.group_reward.size=0: must be null (actor_rollout_ref.rollout.n) or >= 1",
            "verl_judge.group_reward.timeout=0: must be a number of seconds > 0",
        ],
    ),
    "unknown_setting": (
        "gsm8k_rule",
        ["+verl_judge.group_reward.timout=3"],
        ["verl_judge.group_reward: unknown setting(s) ['timout']; known: size, timeout"],
    ),
    "rule": ("gsm8k_rule", [], []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_group_reward_errors(name):
    recipe, overrides, want = CASES[name]
    assert config_checks.group_reward_errors(compose(overrides, recipe)) == want


def test_the_value_check_includes_them():
    cfg = compose([*arms.TOURNAMENT, "reward.num_workers=2"], "gsm8k_local_judge")
    assert WORKERS.format(n=2, name="GroupRewardManager") in config_checks.value_errors(cfg)


def test_default_group_settings():
    """recipes/base.yaml holds the defaults; the manager's own fallback (a config without the section) agrees."""
    group_reward = pytest.importorskip("scripts.train.group_reward")
    base = OmegaConf.load(os.path.join(ROOT, "recipes", "base.yaml")).verl_judge.group_reward
    assert OmegaConf.to_container(base) == {"size": None, "timeout": group_reward.DEFAULT_TIMEOUT}

    def built(extra: dict):
        kwargs = {"base_url": "http://127.0.0.1:9/v1", "mode": "tournament"}
        cfg = OmegaConf.create(
            {
                "actor_rollout_ref": {"rollout": {"n": 3}},
                "reward": {"custom_reward_function": {"reward_kwargs": kwargs}},
            }
        )
        cfg = OmegaConf.merge(cfg, extra)
        manager = group_reward.GroupRewardManager(cfg, None, None)
        return manager.size, manager.timeout

    assert built({}) == built({"verl_judge": {"group_reward": base}}) == (3, 120.0)


@pytest.mark.parametrize(
    "overrides, ok",
    [
        (arms.PAIRWISE_REF, True),
        pytest.param(arms.TOURNAMENT, True, marks=pytest.mark.slow),  # the same check as PAIRWISE_REF, other keys
        ([PAIRWISE, TOURNAMENT], False),
    ],
)
def test_api_judge_pairwise_dry_run(overrides, ok, fx, model_path, tmp_path):
    """``DRY_RUN=1 bash recipes/gsm8k_api_judge/run.sh <the README's overrides>``: config OK (a tournament without
    the group manager: CONFIG ERROR, exit 2); the README shows each set."""
    env = base_env(
        DRY_RUN=1,
        MODEL=model_path,
        NO_FLASH_ATTN=0,
        TRAIN_FILES=fx[("policy", "train")],
        VAL_FILES=fx[("policy", "test")],
        OUTPUT_DIR=tmp_path / "run",
    )
    r = run_recipe("gsm8k_api_judge", env, *overrides)
    text = r.stdout + r.stderr
    if ok:
        assert r.returncode == 0 and "[launch] config OK: recipe gsm8k_api_judge " in text, text[-3000:]
        readme = " ".join(open(os.path.join(ROOT, "recipes", "gsm8k_api_judge", "README.md")).read().split())
        assert " ".join(overrides) in readme.replace(" \\ ", " ")
    else:
        assert r.returncode == 2 and f"[launch] CONFIG ERROR: {UNGROUPED.format(name='rate_limited')}" in text
    assert not (tmp_path / "run").exists()
