"""reward_fns/judge_options.py: the judge rewards' settings, one frozen object per kind built once from the
``reward_kwargs``: its defaults, its checks (each problem named, before a run and at a call) and its cache.
``canary_every`` is checked before a run (``llm_judge.check_options``, the config check) and at every call, so a
value ``compute_score`` cannot read stops a dry run, not the first judged sample."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from reward_fns import llm_judge, pairwise_judge
from reward_fns.judge_options import PairwiseSettings, PointwiseSettings

WHOLE = "canary_every must be a whole number (0: no probes, else >= 2), got "


@pytest.mark.parametrize(
    "value, errors",
    [
        (20, []),
        (2, []),
        (0, []),
        (None, []),
        (40.0, []),
        ("20", []),
        ("abc", [WHOLE + "'abc'"]),
        ("inf", [WHOLE + "'inf'"]),
        (float("inf"), [WHOLE + "inf"]),
        (float("nan"), [WHOLE + "nan"]),
        ("nan", [WHOLE + "'nan'"]),
        (2.5, [WHOLE + "2.5"]),
        (True, [WHOLE + "True"]),
        ("", [WHOLE + "''"]),
        (
            1,
            [
                "canary_every must be 0 (no probes) or >= 2, got 1: 1 would send a probe with every judged sample, "
                "half of all judge calls"
            ],
        ),
        (-3, ["canary_every must be 0 (no probes) or >= 2, got -3"]),
    ],
)
def test_canary_every_is_checked_before_the_run(value, errors):
    assert llm_judge.check_options(base_url="http://127.0.0.1:9/v1", model="j", canary_every=value) == errors


@pytest.mark.parametrize("value, n", [(20, 20), (None, 0), (0, 0), (40.0, 40), (" 7 ", 7)])
def test_accepted_values_read_as_compute_score_reads_them(value, n):
    from reward_fns.judge_options import canary_every_value

    assert canary_every_value(value) == n == int(value or 0)


@pytest.mark.parametrize("value", ["abc", "inf", "nan", 1])
def test_a_call_with_a_bad_canary_every_raises_before_asking(value):
    """compute_score refuses the value at once (a ValueError naming it), not after the sample's judge call."""
    with pytest.raises(ValueError, match="canary_every must be"):
        asyncio.run(
            llm_judge.compute_score(
                "openai/gsm8k", "#### 21", "72", None, base_url="http://127.0.0.1:9/v1", model="j", canary_every=value
            )
        )


# ----------------------------------------------------------------------------- the settings object
POINTWISE_DEFAULTS = {
    "base_url": None,
    "model": None,
    "api_key_env": "OPENAI_API_KEY",
    "timeout": 60.0,
    "max_retries": 4,
    "fallback": "rule",
    "rule_mode": "strict",
    "max_tokens": 512,
    "temperature": 0.0,
    "deadline": 240.0,
    "max_concurrency": 64,
    "cache_size": 4096,
    "cache_ttl": 3600.0,
    "max_response_chars": 12000,
    "extra_body": None,
    "max_response_bytes": 1048576,
    "grounded": True,
    "canary_every": 20,
    "judge_failure": "fallback",
    "mode": "judge",
    "parse_fail_score": "lowest",
    "prompt": "gsm8k_grade",
    "prompt_version": "v3",
}
PAIRWISE_DEFAULTS = {
    **{k: v for k, v in POINTWISE_DEFAULTS.items() if k != "parse_fail_score"},
    "mode": "pairwise_ref",
    "prompt": "pairwise_ref",
    "scheme": "circular",
    "rule_first": False,
}
FIRST = ("base_url", "model", "api_key_env", "timeout", "max_retries", "mode", "fallback", "parse_fail_score")


@pytest.mark.parametrize(
    "kind, defaults, module",
    [(PointwiseSettings, POINTWISE_DEFAULTS, llm_judge), (PairwiseSettings, PAIRWISE_DEFAULTS, pairwise_judge)],
)
def test_every_default_has_one_home(kind, defaults, module):
    """The settings built from no reward_kwargs hold every default; the rewards' ``DEFAULTS`` are a view of them (the
    knobs: every option but the endpoint, the limits of a call, the mode and the scores without a verdict)."""
    assert dataclasses.asdict(kind.of({})) == defaults
    assert module.DEFAULTS == {k: v for k, v in defaults.items() if k not in FIRST}


#: the options both judge kinds take, in the order an unknown option's message lists them (every option: the
#: endpoint's and the mode's too, which a user mistypes most)
KNOBS = (
    "['api_key_env', 'base_url', 'cache_size', 'cache_ttl', 'canary_every', 'deadline', 'extra_body', 'fallback', "
    "'grounded', 'judge_failure', 'max_concurrency', 'max_response_bytes', 'max_response_chars', 'max_retries', "
    "'max_tokens', 'mode', 'model', "
)
PROBLEMS = {
    "valid": (PointwiseSettings, {"mode": "hybrid", "parse_fail_score": 0.5, "fallback": 0}, []),
    "verl's router arguments are no options": (
        PairwiseSettings,
        {"reward_router_address": "h:1", "reward_model_tokenizer": None},
        [],
    ),
    "an unknown key, alone": (
        PointwiseSettings,
        {"modee": "judge", "mode": "bogus"},
        [
            "llm_judge.compute_score: unknown option(s) ['modee'] ('modee': did you mean 'mode'?); known: "
            f"{KNOBS}'parse_fail_score', 'prompt', 'prompt_version', 'rule_mode', 'temperature', 'timeout']"
        ],
    ),
    "two unknown keys, one close to an option": (
        PointwiseSettings,
        {"base_ulr": "http://h/v1", "colour": "red"},
        [
            "llm_judge.compute_score: unknown option(s) ['base_ulr', 'colour'] ('base_ulr': did you mean "
            f"'base_url'?); known: {KNOBS}'parse_fail_score', 'prompt', 'prompt_version', 'rule_mode', 'temperature', "
            "'timeout']"
        ],
    ),
    "a pointwise option is unknown to the pairwise kind": (
        PairwiseSettings,
        {"parse_fail_score": 0.0},
        [
            f"pairwise_judge: unknown option(s) ['parse_fail_score']; known: {KNOBS}'prompt', 'prompt_version', "
            "'rule_first', 'rule_mode', 'scheme', 'temperature', 'timeout']"
        ],
    ),
    "every bad value, in order": (
        PairwiseSettings,
        {"mode": "x", "scheme": "y", "judge_failure": "z", "rule_mode": "w", "fallback": "v", "canary_every": 1},
        [
            "mode must be one of ('pairwise_ref', 'tournament'), got 'x'",
            "scheme must be one of ('circular', 'all_pairs'), got 'y'",
            "judge_failure must be one of ('fallback', 'abstain'), got 'z'",
            "rule_mode must be one of ('strict', 'flexible'), got 'w'",
            "fallback must be 'rule' or a number, got 'v'",
            "canary_every must be 0 (no probes) or >= 2, got 1: 1 would send a probe with every judged sample, "
            "half of all judge calls",
        ],
    ),
    "parse_fail_score is read in its mode": (
        PointwiseSettings,
        {"mode": "hybrid", "parse_fail_score": 0.75, "fallback": float("inf"), "judge_failure": "skip"},
        [
            "judge_failure must be 'fallback' or 'abstain', got 'skip'",
            "fallback must be finite, got inf",
            "parse_fail_score=0.75 is above the reward of the lowest real verdict in mode 'hybrid' (0.5): a policy "
            "would learn to break the judge's reply",
        ],
    ),
    "a prompt of the other kind": (
        PointwiseSettings,
        {"prompt": "pairwise_ref"},
        ["prompt pairwise_ref.v3 is no pointwise prompt (fields {"],
    ),
    "the client's settings": (
        PairwiseSettings,
        {"timeout": 0, "max_concurrency": 0},
        ["timeout must be a number > 0, got 0", "max_concurrency must be a whole number >= 1, got 0"],
    ),
    "a value of the wrong type": (
        PointwiseSettings,
        {"max_tokens": [1]},
        ["max_tokens must be a whole number >= 1, got [1]"],
    ),
    "every number and switch, each naming its key": (
        PairwiseSettings,
        {
            "timeout": "abc",
            "max_retries": 1.5,
            "max_tokens": 0,
            "deadline": -1,
            "cache_size": -1,
            "max_response_chars": "abc",
            "fallback": True,
            "rule_first": "false",
            "grounded": 1,
        },
        [
            "grounded must be true or false, got 1",
            "rule_first must be true or false, got 'false'",
            "timeout must be a number > 0, got 'abc'",
            "max_retries must be a whole number >= 0, got 1.5",
            "max_tokens must be a whole number >= 1, got 0",
            "deadline must be a number > 0, got -1",
            "cache_size must be a whole number >= 0, got -1",
            "max_response_chars must be a whole number >= 1, got 'abc'",
            "fallback must be 'rule' or a number, got True",
        ],
    ),
    "extra_body holds request fields": (
        PointwiseSettings,
        {"extra_body": ["seed"]},
        ["extra_body must be a mapping of request fields, got ['seed']"],
    ),
    "no deadline and no cache expiry are allowed": (
        PointwiseSettings,
        {"deadline": None, "cache_ttl": None, "timeout": 30, "temperature": 0},
        [],
    ),
}


@pytest.mark.parametrize("kind, kwargs, expected", PROBLEMS.values(), ids=PROBLEMS.keys())
def test_the_settings_check_themselves(kind, kwargs, expected):
    """Every problem, each naming its key and value (a prompt's fields in any order: compared up to them); building
    raises them together, as one ValueError."""
    found = kind.problems(kwargs)
    assert [f[: len(e)] if e.endswith("{") else f for f, e in zip(found, expected)] == expected
    assert len(found) == len(expected)
    kwargs = {k: v for k, v in kwargs.items() if k not in kind.VERL_ARGS}
    if expected:
        with pytest.raises(ValueError) as ei:
            kind.of(kwargs)
        assert str(ei.value) == "; ".join(found)
    else:
        assert kind.of(kwargs).mode == kwargs.get("mode", kind.mode)


def test_settings_are_built_once_per_distinct_kwargs():
    """Equal kwargs give the very same object (built and checked once); values that compare equal but read
    differently (0 and False) are different kwargs; a Hydra container is a key by its content."""
    from omegaconf import OmegaConf

    one = PointwiseSettings.of({"mode": "hybrid", "extra_body": {"seed": 0}})
    assert PointwiseSettings.of({"extra_body": {"seed": 0}, "mode": "hybrid"}) is one
    assert PointwiseSettings.of(dict(OmegaConf.create({"mode": "hybrid", "extra_body": {"seed": 0}}))) is one
    assert PointwiseSettings.of({"mode": "hybrid", "extra_body": {"seed": 1}}) is not one
    assert PointwiseSettings.of({"parse_fail_score": 0}).parse_fail_score == 0
    with pytest.raises(ValueError, match="parse_fail_score must be 'lowest' or a finite number, got False"):
        PointwiseSettings.of({"parse_fail_score": False})
    assert PairwiseSettings.of({}) is not PointwiseSettings.of({})
    unhashable = PointwiseSettings.of({"extra_body": {"stop": {"</s>"}}})  # a set: built afresh, equal
    assert PointwiseSettings.of({"extra_body": {"stop": {"</s>"}}}) == unhashable


@pytest.mark.parametrize("value, n", [("20", 20), (40.0, 40), (None, 0), (" 7 ", 7)])
def test_settings_hold_canary_every_as_read(value, n):
    assert PointwiseSettings.of({"canary_every": value}).canary_every == n


def test_built_settings_keep_no_reference_to_the_callers_values():
    """A caller that changes its kwargs after a build changes neither the built settings nor what the same content
    asks for later."""
    body = {"top_p": 0.5}
    kwargs = {"extra_body": body, "max_tokens": 17}
    built = PointwiseSettings.of(kwargs)
    body["top_p"] = 0.9
    assert built.extra_body == {"top_p": 0.5}
    assert PointwiseSettings.of({"extra_body": {"top_p": 0.5}, "max_tokens": 17}).extra_body == {"top_p": 0.5}
