"""The config check of a group reward (scripts/launch/config_checks.group_reward_errors) on composed recipe configs:
the group reward manager needs ``reward.num_workers=1``, a group reward (a function taking ``solution_strs``) and
``rollout.n >= 2``, a function that scores only whole groups (a pairwise tournament, a user's group reward) needs a
manager that gathers a group; ``verl_judge.group_reward``'s defaults live in recipes/base.yaml and agree with
scripts/train/group_reward.py; recipes/gsm8k_api_judge's pairwise override sets pass DRY_RUN=1 through run.sh."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from scripts.lab import arms
from scripts.launch import config_checks
from scripts.launch.config_compose import compose
from tests.scripts.launch.test_recipes import ROOT, base_env, fx, run_recipe  # noqa: F401  (fx: the fixture)

pytest.importorskip("verl")

PAIRWISE = "reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge"
TOURNAMENT = "++reward.custom_reward_function.reward_kwargs.mode=tournament"
WORKERS = (
    "reward.num_workers={n}: the group reward manager ({name}) needs reward.num_workers=1 (the answers of a GRPO "
    "group must reach one reward worker)"
)
NOT_GROUP = (
    "reward.custom_reward_function: {fn} of {path} is no group reward (it takes no solution_strs), which the group "
    'reward manager ({name}) calls with every answer of a GRPO group (recipes/README.md, "Group rewards")'
)
NO_PATH = (
    "reward.custom_reward_function.path is unset: the group reward manager ({name}) calls a group reward "
    '(recipes/README.md, "Group rewards")'
)
UNGROUPED = (
    "reward.custom_reward_function: {fn} of {path} with its reward_kwargs scores a whole GRPO group, which reward "
    "manager {name!r} (source {source}) cannot gather: set reward.reward_manager.source=importlib "
    "reward.reward_manager.name=GroupRewardManager reward.reward_manager.module.path=pkg://scripts.train.group_reward "
    "reward.num_workers=1"
)
PAIRWISE_FN = {"fn": "compute_score", "path": "pkg://reward_fns.pairwise_judge"}
#: a user's group reward (tests/fixtures/group_rewards.py: the README's example), and its module's per-sample one
BY_LENGTH = ["reward.custom_reward_function.path=pkg://tests.fixtures.group_rewards"]
BY_LENGTH_FN = {"fn": "shortest_right_first", "path": "pkg://tests.fixtures.group_rewards"}
REGISTERED = ["reward.reward_manager.name=pairwise_group", "reward.num_workers=1", PAIRWISE, TOURNAMENT]
N8 = ["actor_rollout_ref.rollout.n=8"]  # scripts.lab.policy_learns's (recipes/base.yaml's: 4)
TIMEOUT = "verl_judge.group_reward.timeout={}"
ALONE = (
    "actor_rollout_ref.rollout.n={n}: the group reward manager ({name}) scores each answer with its GRPO group mates "
    "and needs rollout.n >= 2 (with 1 every answer is a group of one, with no mate)"
)
REMAX = (
    "algorithm.adv_estimator=remax: REMAX's greedy baseline answer shares its prompt's uid, so the group reward "
    "manager ({name}) would take it for a group mate (or score it alone after the group timeout): use grpo, or a "
    "reward manager that scores one sample at a time"
)
SIZE = (
    "verl_judge.group_reward.size={size!r}: must be null or actor_rollout_ref.rollout.n ({n}): a smaller size splits "
    "every GRPO group, a larger one makes every group wait verl_judge.group_reward.timeout"
)
TIMED = (
    "verl_judge.group_reward.timeout={!r}: must be a number of seconds in [10, 300] (below, a mate still generating "
    "misses its group, scored without it; above, one lost rollout can hold its step past the stall watchdog's limit)"
)

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
        [NOT_GROUP.format(fn="compute_score", path="pkg://reward_fns.llm_judge", name="GroupRewardManager")],
    ),
    "group_manager_without_a_function": (
        "gsm8k_rule",
        [*arms.GROUP_MANAGER, "reward.custom_reward_function.path=null"],
        [NO_PATH.format(name="GroupRewardManager")],
    ),
    "tournament_under_naive": (
        "gsm8k_local_judge",
        [PAIRWISE, TOURNAMENT],
        [UNGROUPED.format(**PAIRWISE_FN, name="naive", source="register")],
    ),
    "tournament_under_rate_limited": (
        "gsm8k_api_judge",
        [PAIRWISE, TOURNAMENT, "reward.num_workers=1"],
        [UNGROUPED.format(**PAIRWISE_FN, name="rate_limited", source="register")],
    ),
    "a_users_group_reward": (
        "gsm8k_rule",
        [*BY_LENGTH, "reward.custom_reward_function.name=shortest_right_first", *arms.GROUP_MANAGER],
        [],
    ),
    "a_users_group_reward_under_naive": (
        "gsm8k_rule",
        [*BY_LENGTH, "reward.custom_reward_function.name=shortest_right_first"],
        [UNGROUPED.format(**BY_LENGTH_FN, name="naive", source="register")],
    ),
    "a_users_per_sample_reward_under_the_group_manager": (
        "gsm8k_rule",
        [*BY_LENGTH, "reward.custom_reward_function.name=right", *arms.GROUP_MANAGER],
        [NOT_GROUP.format(fn="right", path=BY_LENGTH_FN["path"], name="GroupRewardManager")],
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
        [UNGROUPED.format(**PAIRWISE_FN, name="GroupRewardManager", source="importlib")],
    ),
    "size_and_timeout": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, *N8, "verl_judge.group_reward.size=8", "verl_judge.group_reward.timeout=30.5"],
        [],
    ),
    "the_experiments_rollout_n": ("gsm8k_local_judge", [*arms.TOURNAMENT, *N8], []),
    "timeout_at_its_lower_bound": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(10)], []),
    "timeout_at_its_upper_bound": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(300)], []),
    "bad_size_and_timeout": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=0", TIMEOUT.format(0)],
        [SIZE.format(size=0, n=4), TIMED.format(0)],
    ),
    # a group setting that changes what the arm measures: refused, naming the setting
    "rollout_n_1": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "actor_rollout_ref.rollout.n=1"],
        [ALONE.format(n=1, name="GroupRewardManager")],
    ),
    "rollout_n_1_tournament_by_default": (  # the group manager's default mode is a tournament
        "gsm8k_api_judge",
        [*arms.GROUP_MANAGER, PAIRWISE, "actor_rollout_ref.rollout.n=1"],
        [ALONE.format(n=1, name="GroupRewardManager")],
    ),
    "rollout_n_1_pairwise_ref": (  # each answer against the reference: the group manager gathers nothing
        "gsm8k_api_judge",
        [*arms.PAIRWISE_REF, *arms.GROUP_MANAGER, "actor_rollout_ref.rollout.n=1"],
        [ALONE.format(n=1, name="GroupRewardManager")],
    ),
    "rollout_n_1_without_the_group_manager": ("gsm8k_rule", ["actor_rollout_ref.rollout.n=1"], []),
    "remax": (  # REMAX's greedy baseline shares its prompt's uid: a false mate
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "algorithm.adv_estimator=remax"],
        [REMAX.format(name="GroupRewardManager")],
    ),
    "remax_without_the_group_manager": ("gsm8k_rule", ["algorithm.adv_estimator=remax"], []),
    "size_below_n": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=2"],
        [SIZE.format(size=2, n=4)],
    ),
    "size_above_n": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=8"],
        [SIZE.format(size=8, n=4)],
    ),
    "size_not_a_number": (
        "gsm8k_local_judge",
        [*arms.TOURNAMENT, "verl_judge.group_reward.size=four"],
        [SIZE.format(size="four", n=4)],
    ),
    "timeout_tiny": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(1e-9)], [TIMED.format(1e-9)]),
    "timeout_below": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(9.5)], [TIMED.format(9.5)]),
    "timeout_above": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(300.5)], [TIMED.format(300.5)]),
    "timeout_huge": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format(1e9)], [TIMED.format(1e9)]),
    "timeout_inf": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format("inf")], [TIMED.format(float("inf"))]),
    "timeout_nan": ("gsm8k_local_judge", [*arms.TOURNAMENT, TIMEOUT.format("nan")], [TIMED.format(float("nan"))]),
    "timeout_without_the_group_manager": ("gsm8k_rule", [TIMEOUT.format(1e-9)], [TIMED.format(1e-9)]),
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
    from reward_fns import pairwise_judge

    base = OmegaConf.load(os.path.join(ROOT, "recipes", "base.yaml")).verl_judge.group_reward
    assert OmegaConf.to_container(base) == {"size": None, "timeout": group_reward.DEFAULT_TIMEOUT}

    def built(extra: dict):
        kwargs = {"base_url": "http://127.0.0.1:9/v1", "mode": "tournament"}
        cfg = OmegaConf.create(
            {
                "actor_rollout_ref": {"rollout": {"n": 3}},
                "reward": {
                    "custom_reward_function": {"path": "pkg://reward_fns.pairwise_judge", "reward_kwargs": kwargs}
                },
            }
        )
        cfg = OmegaConf.merge(cfg, extra)
        manager = group_reward.GroupRewardManager(cfg, None, pairwise_judge.compute_score)
        return manager.size, manager.timeout

    assert built({}) == built({"verl_judge": {"group_reward": base}}) == (3, 120.0)


# child: through run.sh in a child process, as the README runs it (else the launcher's main in-process: the same check)
@pytest.mark.parametrize(
    "overrides, ok, child",
    [
        (arms.PAIRWISE_REF, True, True),
        pytest.param(arms.TOURNAMENT, True, True, marks=pytest.mark.slow),  # the same check as PAIRWISE_REF
        ([PAIRWISE, TOURNAMENT], False, False),
    ],
)
def test_api_judge_pairwise_dry_run(overrides, ok, child, fx, model_path, tmp_path, capsys):
    """``DRY_RUN=1 bash recipes/gsm8k_api_judge/run.sh <the README's overrides>``: config OK (a tournament without
    the group manager: CONFIG ERROR, exit 2); the README shows each set."""
    from scripts.launch import launcher

    env = base_env(
        DRY_RUN=1,
        MODEL=model_path,
        NO_FLASH_ATTN=0,
        TRAIN_FILES=fx[("policy", "train")],
        VAL_FILES=fx[("policy", "test")],
        OUTPUT_DIR=tmp_path / "run",
        OPENAI_API_KEY="sk-dry-run",  # the default endpoint is remote: the check wants the key variable set
    )
    if child:
        r = run_recipe("gsm8k_api_judge", env, *overrides)
        rc, text = r.returncode, r.stdout + r.stderr
    else:
        rc = launcher.main(["gsm8k_api_judge", *overrides], env)
        text = "".join(capsys.readouterr())
    if ok:
        assert rc == 0 and "[launch] config OK: recipe gsm8k_api_judge " in text, text[-3000:]
        readme = " ".join(open(os.path.join(ROOT, "recipes", "gsm8k_api_judge", "README.md")).read().split())
        assert " ".join(overrides) in readme.replace(" \\ ", " ")
    else:
        assert (
            rc == 2
            and f"[launch] CONFIG ERROR: {UNGROUPED.format(**PAIRWISE_FN, name='rate_limited', source='register')}"
            in text
        )
    assert not (tmp_path / "run").exists()
