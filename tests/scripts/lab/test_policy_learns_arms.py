"""The pairwise arms of scripts/lab/policy_learns.py (scripts/lab/arms.py): ``--judge-task`` picks the
judge the judge's stages train, an arm rewarded by the other judge stops the command line (exit 2), each arm's run
gets exactly its reward's overrides in both judge placements, and DRY_RUN=1 checks those runs' recipes."""

from __future__ import annotations

import pytest

from reward_fns import pairwise_judge
from scripts.lab import arms, policy_learns
from scripts.workflows.stages import Stages
from tests.scripts.lab.test_policy_learns import run
from tests.scripts.workflows.test_pipeline import fake, needs_model  # noqa: F401  (fake: the fixture)

PAIRWISE = "reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge"
MANAGER = [
    "reward.reward_manager.source=importlib",
    "reward.reward_manager.name=GroupRewardManager",
    "reward.reward_manager.module.path=pkg://scripts.train.group_reward",
    "reward.num_workers=1",
]
KV = 4 * 2**30


def _args(tmp_path, *argv):
    return policy_learns.parse_args(["--out", str(tmp_path), *argv])


def _reward(tmp_path, arm: str, placement: str) -> list[str]:
    """Run ``arm``'s settings after the shared ones (up to ``data.train_files``)."""
    a = _args(tmp_path, "--judge-task", "pairwise_ref", "--arms", arm, "--judge-placement", placement)
    settings = policy_learns.run_settings(Stages(str(tmp_path)), a, arm, arm, 0)
    cut = next(i for i, s in enumerate(settings) if s.startswith("data.train_files="))
    return settings[cut + 1 :]


SERVER = [
    "judge_placement=server",
    "verl_judge.judge_server.gpu_memory_utilization=0.1",
    f"verl_judge.judge_server.kv_cache_memory_bytes={KV}",
]
COLOCATED = [
    "reward.reward_model.rollout.gpu_memory_utilization=0.1",
    "reward.reward_model.rollout.free_cache_engine=false",
    "reward.reward_model.rollout.enforce_eager=true",
    f"+reward.reward_model.rollout.engine_kwargs.vllm.kv_cache_memory_bytes={KV}",
]


@pytest.mark.parametrize(
    "arm, placement, want",
    [
        ("pairwise_ref", "server", [PAIRWISE, "++reward.custom_reward_function.reward_kwargs.mode=pairwise_ref"]),
        ("pairwise_ref", "colocated", [PAIRWISE, "++reward.custom_reward_function.reward_kwargs.mode=pairwise_ref"]),
        ("tournament", "server", [PAIRWISE, "++reward.custom_reward_function.reward_kwargs.mode=tournament", *MANAGER]),
        (
            "tournament",
            "colocated",
            [PAIRWISE, "++reward.custom_reward_function.reward_kwargs.mode=tournament", *MANAGER],
        ),
    ],
)
def test_each_pairwise_arm_gets_exactly_its_reward_settings(arm, placement, want, tmp_path):
    """The reward's overrides, then the placement's (a served judge waits for stage judge_model; the model path is
    ``policy_run``'s); the server's URL reaches pairwise_judge's ``base_url`` through judge_placement=server."""
    got = _reward(tmp_path, arm, placement)
    if placement == "server":
        want = want + SERVER + [f"verl_judge.judge_server.wait_for={tmp_path}/.judge_model.done"]
    else:
        want = want + COLOCATED
    assert got == want
    assert policy_learns.recipe_of(arm) == "gsm8k_local_judge"


def test_the_tournament_scheme_is_pairwise_judges_default_circular():
    """The arm sets no scheme: pairwise_judge's one default holds (a positional
    ``++reward.custom_reward_function.reward_kwargs.scheme=all_pairs`` changes it)."""
    assert pairwise_judge.DEFAULTS["scheme"] == "circular"
    assert not [s for s in arms.ARMS["tournament"] if "scheme" in s]


@pytest.mark.parametrize("arm", arms.MODE_ARMS)
def test_an_arm_named_after_a_reward_mode_runs_that_mode(arm):
    """``arms.MODE_ARMS`` bear their reward's ``mode``: the one their overrides set, else their reward's default."""
    from reward_fns.judge_options import PairwiseSettings, PointwiseSettings

    said = [o.rpartition("=")[2] for o in arms.ARMS[arm] if o.startswith(arms.KWARGS + "mode=")]
    kind = PairwiseSettings if any("pairwise_judge" in o for o in arms.ARMS[arm]) else PointwiseSettings
    assert (said or [kind.mode])[-1] == arm
    assert arm in kind.MODES


@pytest.mark.parametrize(
    "argv, task, want",
    [
        ([], "pointwise", ["rule", "judge"]),
        (["--judge-task", "pointwise"], "pointwise", ["rule", "judge"]),
        (["--judge-task", "pairwise_ref"], "pairwise_ref", ["rule", "pairwise_ref"]),
        (["--judge-task", "pairwise_ref", "--no-rule"], "pairwise_ref", ["pairwise_ref"]),
        (["--judge-task", "pairwise_ref", "--arms", "tournament,random"], "pairwise_ref", ["tournament", "random"]),
    ],
)
def test_the_judge_task_and_the_default_arms(argv, task, want, tmp_path, monkeypatch):
    """The default judged arm is the judge task's; ``cfg.task`` is what the judge's stages and ``--reuse`` read."""
    seen = []
    monkeypatch.setattr(policy_learns, "dry_run", lambda flow, cfg: seen.append((cfg.task, list(cfg.arms))) or 0)
    monkeypatch.setenv("DRY_RUN", "1")
    assert policy_learns.main(["--out", str(tmp_path / "x"), *argv]) == 0
    assert seen == [(task, want)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--arms", "rule,tournament"],
            "--arms tournament: rewarded by the pairwise_ref judge, but --judge-task pointwise trains the pointwise "
            "judge",
        ),
        (
            ["--judge-task", "pointwise", "--arms", "pairwise_ref,judge,tournament"],
            "--arms pairwise_ref,tournament: rewarded by the pairwise_ref judge, but --judge-task pointwise",
        ),
        (
            ["--judge-task", "pairwise_ref", "--arms", "judge,route,flaky_abstain,tournament"],
            "--arms judge,route,flaky_abstain: rewarded by the pointwise judge, but --judge-task pairwise_ref trains "
            "the pairwise_ref judge",
        ),
        (["--judge-task", "pairwise"], "argument --judge-task: invalid choice: 'pairwise'"),
    ],
)
def test_an_arm_of_the_other_judge_stops_the_command_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DRY_RUN", "1")
    with pytest.raises(SystemExit) as e:
        policy_learns.main(["--out", str(tmp_path / "x"), *argv])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and line.startswith("python -m scripts.lab.policy_learns: error: ") and message in line, (
        line
    )
    assert not (tmp_path / "x").exists()


def test_every_arm_names_the_judge_it_needs():
    assert {arm: arms.NEEDS.get(arm) for arm in arms.ARMS} == {
        "rule": None,
        "judge": "pointwise",
        "random": None,
        "format": None,
        "route": "pointwise",
        "flaky_fallback": "pointwise",
        "flaky_abstain": "pointwise",
        "pairwise_ref": "pairwise_ref",
        "tournament": "pairwise_ref",
    }
    assert set(arms.DEFAULT_JUDGED) == {"pointwise", "pairwise_ref"}  # pipeline.TASKS' names, the judges it trains


@needs_model
@pytest.mark.parametrize("placement", ["server", pytest.param("colocated", marks=pytest.mark.slow)])
def test_dry_run_checks_the_pairwise_arms(placement, fake):
    """Each pairwise arm's run, with the settings it gets, passes the config check (the group manager's rules
    included: scripts/launch/config_checks.group_reward_errors)."""
    tmp, env = fake
    env["DRY_RUN"] = "1"
    argv = ["--out", str(tmp / "dry"), "--judge-task", "pairwise_ref", "--arms", "pairwise_ref,tournament"]
    r = run(env, *argv, "--no-rule", "--judge-placement", placement)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("config OK: recipe gsm8k_local_judge") == 2 and "CONFIG ERROR" not in r.stdout
    assert "++reward.custom_reward_function.reward_kwargs.mode=tournament reward.reward_manager.source=importlib" in (
        r.stdout
    )
    assert not (tmp / "dry").exists()


@needs_model
def test_dry_run_refuses_a_tournament_split_over_reward_workers(fake):
    """A user's ``reward.num_workers=2`` (positional, last) breaks the tournament's groups: the check says so."""
    tmp, env = fake
    env["DRY_RUN"] = "1"
    argv = ["--out", str(tmp / "dry"), "--judge-task", "pairwise_ref", "--no-rule", "--arms", "tournament"]
    r = run(env, *argv, "reward.num_workers=2")
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert (
        "CONFIG ERROR: reward.num_workers=2: the group reward manager (GroupRewardManager) needs "
        "reward.num_workers=1 (the answers of a GRPO group must reach one reward worker)"
    ) in r.stdout
