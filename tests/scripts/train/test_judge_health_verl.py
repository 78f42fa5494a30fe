"""Judge-health step metrics and the silent-judge fail-fast, through verl 0.9.1's own code on CPU.

A fake OpenAI-compatible judge (``tests.doubles.fake_openai`` on 127.0.0.1) fails a known share of
requests: ``FAULT:<kind>`` in a policy response makes it answer that request with HTTP 500/503 or a
broken body (after the client's retries: a transport failure), ``JUDGE_SAYS:?``, ``FAULT:empty`` and
``FAULT:truncated`` make it answer without a verdict (a parse failure). Each batch of 8 responses is
scored by verl's real ``RewardLoopManager`` (one Ray reward worker, ``naive`` manager) running
``reward_fns.llm_judge.compute_score``, and then goes through the steps of the legacy trainer's
``RayPPOTrainer.fit`` that lead to the step metrics, with the functions looked up on verl's module
``verl.trainer.ppo.ray_trainer`` as ``fit`` looks them up, after ``scripts.train.seam.install``
replaced some of them: ``batch.union(reward)``, ``extract_reward``, the extras put into ``non_tensor_batch``,
GRPO ``compute_advantage`` and ``compute_data_metrics`` (verl's own underneath).

* Table-driven fault mixes: every judge-health metric equals the value counted by hand from the
  table, next to verl's own ``critic/score/mean``, and the patched ``compute_data_metrics`` returns
  verl's metrics for the same batch unchanged.
* Fail-fast: a judge that never answers (transport failures, or replies without a verdict) raises
  ``JudgeSilentError`` at exactly the step set by ``verl_judge.fail_fast`` (steps, threshold) with a
  message naming the cause; a step where the judge answers resets the count.
* The ``JudgeSilentError`` raised here, re-raised inside a Ray task and caught from ``ray.get`` as
  the task runner's error is, makes ``scripts.train.trainer.exit_on_silent_judge`` exit with status 3.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("verl")
ray = pytest.importorskip("ray")

from scripts.train import trainer as train  # noqa: E402
from scripts.train.seam import install  # noqa: E402
from scripts.train.watches import JudgeSilentError, RewardHackingError  # noqa: E402
from tests.doubles.fake_openai import FakeOpenAIServer  # noqa: E402
from tests.reward_fns.test_llm_judge_verl import compose, make_batch  # noqa: E402

N = 4  # GRPO group size (actor_rollout_ref.rollout.n): samples 0-3 answer prompt p0, 4-7 prompt p1
GROUND_TRUTH = "72"

# token -> (response tail, score, judge_score, rule_score, judge_error, judge_parse_fail, judge_fallback)
# in judge mode with the defaults fallback="rule" and parse_fail_score="lowest" (0.0). The fake judge
# grades 4 when the response's "#### N" equals the reference 72, else 1, unless JUDGE_SAYS overrides.
SPEC = {
    "c4": ("#### 72", 1.0, 4.0, 1.0, 0.0, 0.0, 0.0),
    "w1": ("#### 71", 0.25, 1.0, 0.0, 0.0, 0.0, 0.0),
    "c2": ("#### 72 JUDGE_SAYS:2", 0.5, 2.0, 1.0, 0.0, 0.0, 0.0),  # verdict < 3 on a right answer: disagrees
    "w3": ("#### 71 JUDGE_SAYS:3", 0.75, 3.0, 0.0, 0.0, 0.0, 0.0),  # verdict >= 3 on a wrong answer: disagrees
    "w4": ("#### 71 JUDGE_SAYS:4", 1.0, 4.0, 0.0, 0.0, 0.0, 0.0),  # a gamed judge: full reward for a wrong answer
    "c500x1": ("FAULT:500x1\n#### 72", 1.0, 4.0, 1.0, 0.0, 0.0, 0.0),  # one 500, answered on the retry
    # transport failures after the retries: the rule reward as fallback
    "c500": ("FAULT:500\n#### 72", 1.0, -1.0, 1.0, 1.0, 0.0, 1.0),
    "w500": ("FAULT:500\n#### 71", 0.0, -1.0, 0.0, 1.0, 0.0, 1.0),
    "w503": ("FAULT:503\n#### 71", 0.0, -1.0, 0.0, 1.0, 0.0, 1.0),
    "cjson": ("FAULT:malformed_json\n#### 72", 1.0, -1.0, 1.0, 1.0, 0.0, 1.0),
    # answered without a verdict: what a verdict of 0 earns (0.0)
    "c?": ("#### 72 JUDGE_SAYS:?", 0.0, -1.0, 1.0, 0.0, 1.0, 0.0),
    "w?": ("#### 71 JUDGE_SAYS:?", 0.0, -1.0, 0.0, 0.0, 1.0, 0.0),
    "wempty": ("FAULT:empty\n#### 71", 0.0, -1.0, 0.0, 0.0, 1.0, 0.0),
    "ctrunc": ("FAULT:truncated\n#### 72", 0.0, -1.0, 1.0, 0.0, 1.0, 0.0),
}
COLUMNS = ("score", "judge_score", "rule_score", "judge_error", "judge_parse_fail", "judge_fallback")

# Expected values counted by hand from the 8 tokens of each row ("answered" = no error, no parse failure;
# agree = (verdict >= 3) == (rule == 1) over answered samples; critic/score/mean = mean of the scores).
CASES = {
    "3 of 8 HTTP 500": (
        ["c4", "c2", "c500", "w1", "c500", "w500", "w3", "c4"],
        {
            "judge_health/error_rate": 3 / 8,
            "judge_health/parse_fail_rate": 0.0,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 3 / 8,
            "judge_health/answered_rate": 5 / 8,
            "judge_health/score_mean": (4 + 2 + 1 + 3 + 4) / 5,
            "judge_health/agree_rule": 3 / 5,  # c4, w1, c4 agree; c2, w3 do not
            "judge_health/accept_rule_reject": 1 / 5,  # w3
            "judge_health/reject_rule_accept": 1 / 5,  # c2
            "critic/score/mean": (1 + 0.5 + 1 + 0.25 + 1 + 0 + 0.75 + 1) / 8,
            "grpo/identical_reward_groups": 0.0,
        },
    ),
    "2 of 8 without a verdict": (
        ["c4", "c?", "wempty", "c2", "w1", "w1", "w1", "w1"],
        {
            "judge_health/error_rate": 0.0,
            "judge_health/parse_fail_rate": 2 / 8,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 0.0,
            "judge_health/answered_rate": 6 / 8,
            "judge_health/score_mean": (4 + 2 + 1 + 1 + 1 + 1) / 6,
            "judge_health/agree_rule": 5 / 6,  # only c2 disagrees
            "judge_health/accept_rule_reject": 0.0,
            "judge_health/reject_rule_accept": 1 / 6,
            "critic/score/mean": (1 + 0 + 0 + 0.5 + 0.25 * 4) / 8,
            "grpo/identical_reward_groups": 1 / 2,  # group p1: four 0.25
        },
    ),
    "3 transport + 2 no verdict + 1 retried": (
        ["c500", "w503", "cjson", "c4", "ctrunc", "w?", "w3", "c500x1"],
        {
            "judge_health/error_rate": 3 / 8,
            "judge_health/parse_fail_rate": 2 / 8,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 3 / 8,
            "judge_health/answered_rate": 3 / 8,
            "judge_health/score_mean": (4 + 3 + 4) / 3,
            "judge_health/agree_rule": 2 / 3,  # c4, c500x1 agree; w3 does not
            "judge_health/accept_rule_reject": 1 / 3,
            "judge_health/reject_rule_accept": 0.0,
            "critic/score/mean": (1 + 0 + 1 + 1 + 0 + 0 + 0.75 + 1) / 8,
            "grpo/identical_reward_groups": 0.0,
        },
    ),
    "judge down: 8 of 8 transport": (
        ["c500", "w500", "c500", "w503", "cjson", "w500", "c500", "c500"],
        {
            "judge_health/error_rate": 1.0,
            "judge_health/parse_fail_rate": 0.0,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 1.0,
            "judge_health/answered_rate": 0.0,
            "judge_health/score_mean": 0.0,  # nothing answered
            "judge_health/agree_rule": 0.0,
            "judge_health/accept_rule_reject": 0.0,
            "judge_health/reject_rule_accept": 0.0,
            "critic/score/mean": (1 + 0 + 1 + 0 + 1 + 0 + 1 + 1) / 8,  # the rule fallback
            "grpo/identical_reward_groups": 0.0,
        },
    ),
}

# fail-fast steps: 8 responses each
STEPS = {
    "down": ["c500", "w500"] * 4,  # error 8/8
    "mute": ["c?", "w?", "wempty", "ctrunc"] * 2,  # parse failure 8/8
    "half": ["c500", "w503", "c?", "wempty", "c4", "w1", "c2", "w3"],  # error 2/8 + parse failure 2/8
    "ok": ["c4", "w1", "c2", "w3"] * 2,
}
SHARES = {"down": (1.0, 0.0), "mute": (0.0, 1.0), "half": (2 / 8, 2 / 8), "ok": (0.0, 0.0)}  # (error, parse fail)

# a policy that learns to game the judge: right answers (c4) and honest wrong ones (w1) give way to wrong
# answers the judge accepts (w4); the reward climbs while the rule's accuracy falls
GAMED = [
    ["c4"] * 4 + ["w1"] * 4,
    ["c4"] * 4 + ["w1"] * 4,
    ["c4"] * 3 + ["w4"] * 2 + ["w1"] * 3,
    ["c4"] * 2 + ["w4"] * 4 + ["w1"] * 2,
    ["c4"] + ["w4"] * 6 + ["w1"],
]
HONEST = [["c4"] * k + ["w1"] * (8 - k) for k in (2, 3, 4, 5, 6)]  # the policy learns; the judge agrees
HACKING_WATCH = {"enable": True, "window": 4, "min_rise": 0.05, "min_fall": 0.02}


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def judge(ray_cluster, model_path, tokenizer):
    """The fake judge and verl's RewardLoopManager (1 Ray reward worker) calling llm_judge against it."""
    from verl.experimental.reward_loop import RewardLoopManager

    with FakeOpenAIServer() as srv:
        cfg = compose(
            model_path,
            [
                "algorithm.adv_estimator=grpo",
                f"actor_rollout_ref.rollout.n={N}",
                "reward.num_workers=1",
                "reward.reward_manager.name=naive",
                f"+reward.custom_reward_function.reward_kwargs.base_url={srv.base_url}",
                "+reward.custom_reward_function.reward_kwargs.model=judge",
                "+reward.custom_reward_function.reward_kwargs.api_key_env=null",
                "+reward.custom_reward_function.reward_kwargs.mode=judge",
                # the guard off: these judges are scripted to pay wrong answers (JUDGE_SAYS:4 on "#### 71"), which the
                # fail-closed guard stops (tests/reward_fns/test_guard.py); here they test the health metrics and the
                # hacking watch, the defence against a judge gamed in ways no guard reads
                "+reward.custom_reward_function.reward_kwargs.grounded=false",
            ],
            path="pkg://reward_fns.llm_judge",
        )
        mgr = RewardLoopManager(cfg)
        try:
            yield Judge(cfg, mgr, tokenizer, srv)
        finally:
            for w in mgr.reward_loop_workers:
                ray.kill(w)


class Judge:
    def __init__(self, cfg, mgr, tokenizer, srv):
        self.cfg, self.mgr, self.tokenizer, self.srv = cfg, mgr, tokenizer, srv

    def rollout(self, tag: str, tokens: list[str]):
        """A rollout batch as verl's fit() holds it before the reward: 2 prompts x n=4, uids repeated
        (interleaved), response_mask from verl's compute_response_mask. Every response is unique
        (tag and index) so that no judge reply comes from the client's cache."""
        from verl.trainer.ppo.ray_trainer import compute_response_mask

        assert len(tokens) == 2 * N
        batch = make_batch(
            self.tokenizer, [(f"[{tag}-{i}] {SPEC[t][0]}", GROUND_TRUTH, None) for i, t in enumerate(tokens)]
        )
        batch.non_tensor_batch["uid"] = np.array(["p0"] * N + ["p1"] * N, dtype=object)
        batch.batch["response_mask"] = compute_response_mask(batch)
        return batch

    def step(self, tag: str, tokens: list[str]):
        """One training step from the reward on: returns (step metrics, reward extras, final batch)."""
        from verl.trainer.ppo import ray_trainer
        from verl.trainer.ppo.utils import need_critic

        cfg = self.cfg
        batch = self.rollout(tag, tokens)
        # RayPPOTrainer._compute_reward_colocate + fit(): the reward loop's DataProto joins the batch
        batch = batch.union(self.mgr.compute_rm_score(batch))
        reward_tensor, extras = ray_trainer.extract_reward(batch)
        batch.batch["token_level_scores"] = reward_tensor
        if extras:
            batch.non_tensor_batch.update({k: np.array(v) for k, v in extras.items()})
        batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]  # use_kl_in_reward=False
        batch = ray_trainer.compute_advantage(
            batch,
            adv_estimator=cfg.algorithm.adv_estimator,
            gamma=cfg.algorithm.gamma,
            lam=cfg.algorithm.lam,
            num_repeat=cfg.actor_rollout_ref.rollout.n,
            norm_adv_by_std_in_grpo=cfg.algorithm.get("norm_adv_by_std_in_grpo", True),
            config=cfg.algorithm,
        )
        metrics = ray_trainer.compute_data_metrics(batch=batch, use_critic=need_critic(cfg))
        return metrics, extras, batch


@pytest.fixture
def hooks(monkeypatch, judge):
    """``install(cfg)`` on verl's modules, undone after the test by monkeypatch."""
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.ppo import metric_utils, ray_trainer, reward

    # verl's own functions are in place (earlier tests restored them)
    assert ray_trainer.extract_reward is reward.extract_reward
    assert ray_trainer.compute_data_metrics is metric_utils.compute_data_metrics

    def _install(threshold: float = 0.5, steps: int = 3, enable: bool = True, hacking_watch: dict | None = None):
        cfg = copy.deepcopy(judge.cfg)  # the trainer config, with the recipe's verl_judge section
        with open_dict(cfg):
            cfg.verl_judge = OmegaConf.create(
                {
                    "pair_groups": False,
                    "fail_fast": {"enable": enable, "threshold": threshold, "steps": steps},
                    "hacking_watch": hacking_watch or {},
                }
            )
        install(cfg)
        assert ray_trainer.compute_data_metrics is not metric_utils.compute_data_metrics  # patched
        assert ray_trainer.extract_reward is reward.extract_reward  # verl's own (the keys come from the batch)

    return _install


# ------------------------------------------------------------------------------------------ tests
@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_step_metrics_count_judge_failures(case, judge, hooks):
    from verl.trainer.ppo.metric_utils import compute_data_metrics as verl_compute_data_metrics

    tokens, want = CASES[case]
    hooks(threshold=0.5, steps=2)  # one step: never enough to stop
    tag = f"t{list(CASES).index(case)}"
    metrics, extras, batch = judge.step(tag, tokens)

    # what verl's reward loop returned per sample: the faults the fake judge injected
    for j, col in enumerate(COLUMNS):
        got = extras[col].tolist()
        assert got == [SPEC[t][1 + j] for t in tokens], (col, got)
    assert batch.batch["token_level_scores"].sum(-1).tolist() == [SPEC[t][1] for t in tokens]
    # every sample reached the fake judge; its HTTP attempts are the requests the server received for it
    seen = [sum(f"[{tag}-{i}]" in r.user for r in judge.srv.requests) for i in range(len(tokens))]
    assert extras["judge_attempts"].tolist() == [float(k) for k in seen] and min(seen) >= 1, seen
    assert [k > 1 for k in seen] == [SPEC[t][4] == 1.0 or t.endswith("x1") for t in tokens]  # failures retried

    for key, value in want.items():
        assert metrics[key] == value, (key, metrics[key], value)
    assert metrics["critic/rewards/mean"] == want["critic/score/mean"]
    assert metrics["reward/judge_error/mean"] == want["judge_health/error_rate"]
    assert metrics["reward/judge_parse_fail/mean"] == want["judge_health/parse_fail_rate"]
    # the hooks add keys; verl's own metrics for this batch are all there, unchanged
    verl_metrics = verl_compute_data_metrics(batch=batch, use_critic=False)
    assert {k: metrics[k] for k in verl_metrics} == verl_metrics
    assert not any(k.startswith(("judge_health/", "reward/", "grpo/")) for k in verl_metrics)


@pytest.mark.parametrize(
    "threshold, steps, seq, stops_at, message",
    [
        pytest.param(
            0.5,
            3,
            ["down"] * 5,
            3,
            r"judge requests failed for 100% of samples .* for 3 consecutive steps",
            id="every request fails, K=3",
        ),
        pytest.param(
            0.5,
            2,
            ["mute"] * 5,
            2,
            r"judge answered without a valid verdict for 100% of samples.*max_tokens",
            id="every reply without a verdict, K=2",
        ),
        # an answering step resets the count; 2/8 errors + 2/8 parse failures = 0.5 is not above threshold 0.5
        pytest.param(
            0.5,
            2,
            ["down", "ok", "down", "half", "down", "mute", "down"],
            6,
            r"without a valid verdict for 100% .*threshold=0\.5 for 2 consecutive",
            id="answered steps reset",
        ),
        # ... but is above threshold 0.25 (errors >= parse failures: named as transport failures)
        pytest.param(
            0.25,
            2,
            ["half", "ok", "half", "half", "half"],
            4,
            r"judge requests failed for 25% .*threshold=0\.25",
            id="threshold from the config",
        ),
    ],
)
def test_fail_fast_stops_at_step_k(threshold, steps, seq, stops_at, message, judge, hooks):
    hooks(threshold=threshold, steps=steps)
    for i, kind in enumerate(seq, 1):
        if i < stops_at:
            metrics, _, _ = judge.step(f"ff{threshold}-{steps}-{len(seq)}-{i}", STEPS[kind])
            assert (metrics["judge_health/error_rate"], metrics["judge_health/parse_fail_rate"]) == SHARES[kind]
            continue
        with pytest.raises(JudgeSilentError, match=message) as err:
            judge.step(f"ff{threshold}-{steps}-{len(seq)}-{i}", STEPS[kind])
        assert "verl_judge.fail_fast.enable=false" in str(err.value)
        break
    else:
        pytest.fail("no JudgeSilentError")


def test_fail_fast_disabled_keeps_training(judge, hooks):
    """verl_judge.fail_fast.enable=false: a silent judge is reported, not stopped."""
    hooks(threshold=0.5, steps=1, enable=False)
    for i in range(2):
        metrics, _, _ = judge.step(f"off-{i}", STEPS["down"])
        assert metrics["judge_health/error_rate"] == 1.0


def test_ray_wrapped_silent_judge_exits_3(judge, hooks, capsys):
    """The JudgeSilentError the patched compute_data_metrics raised, re-raised in a Ray task: what
    ``ray.get`` raises for the task runner is turned into exit status 3 with the message last."""
    hooks(threshold=0.5, steps=1)
    with pytest.raises(JudgeSilentError) as caught:
        judge.step("ray-0", STEPS["down"])
    silent = caught.value

    @ray.remote(num_cpus=0)
    def task_runner_run(err):
        raise err

    with pytest.raises(ray.exceptions.RayTaskError) as wrapped:
        ray.get(task_runner_run.remote(silent))
    assert str(train.silent_judge(wrapped.value)) == str(silent)  # the cause Ray carried back
    with pytest.raises(SystemExit) as ex:
        train.exit_on_silent_judge(wrapped.value)
    assert ex.value.code == train.SILENT_JUDGE_EXIT == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"error: {silent}" and last.startswith("error: stopping: judge requests failed for 100%")
    assert train.exit_on_silent_judge(RuntimeError("something else")) is None  # other errors: unchanged


@pytest.mark.parametrize(
    "seq, rule, accept_rule_reject, reward, alarms",
    [
        pytest.param(
            GAMED,
            [4 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8],
            [0.0, 0.0, 2 / 8, 4 / 8, 6 / 8],
            [0.625, 0.625, 0.71875, 0.8125, 0.90625],
            [0.0, 0.0, 0.0, 1.0, 1.0],
            id="gamed judge",
        ),
        pytest.param(
            HONEST,
            [2 / 8, 3 / 8, 4 / 8, 5 / 8, 6 / 8],
            [0.0] * 5,
            [0.4375, 0.53125, 0.625, 0.71875, 0.8125],
            [0.0] * 5,
            id="honest judge",
        ),
    ],
)
def test_hacking_watch_on_a_scripted_judge(seq, rule, accept_rule_reject, reward, alarms, judge, hooks, capsys):
    """The fake judge scripted to accept wrong answers (JUDGE_SAYS:4): per-step shares through verl's reward
    loop and trainer functions, the alarm from the first full window (4 steps), one warning in the log."""
    hooks(hacking_watch=dict(HACKING_WATCH, fail=False))
    got = {
        k: []
        for k in (
            "reward/rule_score/mean",
            "judge_health/accept_rule_reject",
            "critic/score/mean",
            "judge_health/hacking_alarm",
            "judge_health/agree_rule",
        )
    }
    for i, tokens in enumerate(seq):
        metrics, _, _ = judge.step(f"hw-{'gamed' if seq is GAMED else 'honest'}-{i}", tokens)
        for k in got:
            got[k].append(metrics[k])
    assert got["reward/rule_score/mean"] == rule
    assert got["judge_health/accept_rule_reject"] == accept_rule_reject
    assert got["judge_health/agree_rule"] == [1 - x for x in accept_rule_reject]
    assert got["critic/score/mean"] == reward
    assert got["judge_health/hacking_alarm"] == alarms
    warnings = [ln for ln in capsys.readouterr().out.splitlines() if "reward hacking suspected" in ln]
    assert len(warnings) == int(max(alarms))
    if warnings:
        assert "the judge accepts 0.500 of answers the rule rejects" in warnings[0]


def test_hacking_watch_fail_stops_with_exit_3(judge, hooks, capsys):
    hooks(hacking_watch=dict(HACKING_WATCH, fail=True))
    for i, tokens in enumerate(GAMED[:3]):
        judge.step(f"hwfail-{i}", tokens)
    with pytest.raises(RewardHackingError, match="reward hacking suspected") as caught:
        judge.step("hwfail-3", GAMED[3])
    with pytest.raises(SystemExit) as ex:
        train.exit_on_silent_judge(caught.value)
    assert ex.value.code == 3
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {caught.value}"
