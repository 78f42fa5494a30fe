"""The config check of the reward function verl will call (``config_checks.reward_call_errors``,
``config_paths.check_paths``) on composed recipe configs: a function whose signature cannot take verl 0.9.1's keyword
call, a name that is no function, and a file that is not valid Python are refused before anything starts, each with
its cause (they failed at the first reward call, or read as "not defined")."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from scripts.launch import config_checks
from scripts.launch.config_compose import compose
from scripts.launch.config_paths import check_paths
from tests.scripts.launch.test_recipes import BATCH_ROWS, fx  # noqa: F401  (fx: the fixture)

pytest.importorskip("verl")

PATH = "reward.custom_reward_function.path=pkg://tests.fixtures.per_sample_rewards"
WHERE = "reward.custom_reward_function: {} of pkg://tests.fixtures.per_sample_rewards"
CALL = "data_source=..., solution_str=..., ground_truth=..., extra_info=..."
FORM = "a reward is compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)"
ROUTER = "reward_router_address=..., reward_model_tokenizer=..."

# (recipe, function, extra overrides) -> the messages, exactly
CASES = [
    ("gsm8k_rule", "verls_form", [], []),
    ("gsm8k_rule", "as_async", [], []),
    ("gsm8k_rule", "named_options", ["+reward.custom_reward_function.reward_kwargs.scale=2"], []),
    ("gsm8k_local_judge", "verls_form", [], []),  # the router's kwargs go to **kwargs
    (
        "gsm8k_rule",
        "no_extra_info",
        [],
        [
            f"{WHERE.format('no_extra_info')} cannot take verl's call no_extra_info({CALL}): got an unexpected keyword "
            f"argument 'extra_info'; {FORM}"
        ],
    ),
    (
        "gsm8k_rule",
        "renamed",
        [],
        [
            f"{WHERE.format('renamed')} cannot take verl's call renamed({CALL}): missing a required argument: "
            f"'response'; {FORM}"
        ],
    ),
    (
        "gsm8k_rule",
        "named_options",
        ["+reward.custom_reward_function.reward_kwargs.scael=2"],
        [
            f"{WHERE.format('named_options')} cannot take verl's call named_options({CALL}, scael=...): got an "
            f"unexpected keyword argument 'scael'; {FORM}"
        ],
    ),
    (
        "gsm8k_local_judge",  # a colocated judge: verl adds the router's address and the judge's tokenizer
        "named_options",
        [],
        [
            f"{WHERE.format('named_options')} cannot take verl's call named_options({CALL}, {ROUTER}): got an "
            f"unexpected keyword argument 'reward_router_address'; {FORM}"
        ],
    ),
    ("gsm8k_rule", "not_callable", [], [f"{WHERE.format('not_callable')} is a int, not a function verl can call"]),
]


@pytest.mark.parametrize("recipe, fn, extra, messages", CASES, ids=[f"{r}-{f}-{len(e)}" for r, f, e, _ in CASES])
def test_reward_call_errors(recipe, fn, extra, messages):
    cfg = compose([PATH, f"reward.custom_reward_function.name={fn}", *extra], recipe)
    assert config_checks.reward_call_errors(cfg) == messages
    assert [m for m in config_checks.value_errors(cfg) if m.startswith("reward.custom_reward_function:")] == messages


def test_a_reward_file_that_is_not_python_says_so(tmp_path, monkeypatch):
    for var in ("MODEL", "TRAIN_FILES", "VAL_FILES"):  # not the subject: only the reward's messages are read
        monkeypatch.setenv(var, str(tmp_path / var))
    bad = tmp_path / "fancy.py"
    bad.write_text("def compute_score(:\n    return 1.0\n")
    cfg = compose([f"reward.custom_reward_function.path={bad}"], "gsm8k_rule")
    errors, _ = check_paths(cfg)
    assert [e for e in errors if e.startswith("reward.")] == [
        f"reward.custom_reward_function.path: {bad} is not valid Python: SyntaxError: invalid syntax (line 1)"
    ]


# (recipe, the data set its files come from) -> the label its first row's message quotes (None: the labels read);
# tests/scripts/launch/test_recipes.py's fx: policy rows "72", pointwise "4", pairwise "A"
LABELS = [
    ("gsm8k_rule", "policy", None),
    ("gsm8k_rule", "pairwise", "GSM8K ground truth is not a number or a '#### N' solution: 'A'"),
    ("gsm8k_local_judge", "pairwise", "GSM8K ground truth is not a number or a '#### N' solution: 'A'"),
    ("gsm8k_api_judge", "policy", None),
    ("judge_pointwise", "pointwise", None),
    ("judge_pointwise", "pairwise", "pointwise ground truth must be an integer 0-4, got 'A'"),
    ("judge_pairwise", "pairwise", None),
    ("judge_pairwise", "pointwise", "pairwise ground truth must be one of ('A', 'B'), got '4'"),
    ("gsm8k_rule", "pointwise", None),  # a number is a GSM8K reference: no check tells these two apart
]


@pytest.mark.parametrize("recipe, data, message", LABELS, ids=[f"{r}-{d}" for r, d, _ in LABELS])
def test_data_of_another_task_is_refused_before_anything_starts(fx, recipe, data, message):
    from scripts.launch.config_paths import LABEL_ROWS, label_errors

    files = {"data.train_files": fx[(data, "train")], "data.val_files": fx[(data, "test")]}
    cfg = compose([f"{k}={v}" for k, v in files.items()], recipe)
    path = OmegaConf.select(cfg, "reward.custom_reward_function.path")
    rows = min(LABEL_ROWS, BATCH_ROWS)
    assert label_errors(cfg) == [
        f"{key}: {f}: {rows} of its first {rows} rows have a label {path} cannot read (row 0: {message}); is this data "
        "made for another task?"
        for key, f in files.items()
        if message
    ]
