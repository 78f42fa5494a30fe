"""The arms of ``scripts.lab.policy_learns``: each arm's reward as Hydra overrides of its recipe, and the judge it
needs.

``rule`` and the controls (``random``, ``format``: ``reward_fns/controls.py``) run recipes/gsm8k_rule; the judged arms
run recipes/gsm8k_local_judge with the judge the experiment trains (``--judge-task``), in whichever placement the
run asks (``--judge-placement``; a served judge's URL reaches the reward's ``base_url`` through the placement's own
``reward_kwargs``, whichever reward function reads them):

* pointwise judge (``reward_fns/llm_judge.py``): ``judge``, ``route`` (asked only where the rule cannot decide),
  ``flaky_fallback`` / ``flaky_abstain`` (20% of its calls fail: ``scripts/lab/bench/flaky_judge.py``);
* pairwise judge (``reward_fns/pairwise_judge.py``, the reference-guided ``<better>A|B</better>`` judge):
  ``pairwise_ref`` (each answer against the reference solution, both orders, per sample) and ``tournament`` (each
  answer against its GRPO group mates, ``scheme`` circular unless
  ``++reward.custom_reward_function.reward_kwargs.scheme=all_pairs``, through the group reward manager
  ``scripts/train/group_reward.py``, which needs ``reward.num_workers=1``).

    from scripts.lab.arms import ARMS, NEEDS
"""

from __future__ import annotations

from reward_fns.judge_options import Mode
from scripts.workflows.pipeline import PAIRWISE_REF_REWARD

KWARGS = "++reward.custom_reward_function.reward_kwargs."
FLAKY = "reward.custom_reward_function.path=pkg://scripts.lab.bench.flaky_judge"
PAIRWISE = PAIRWISE_REF_REWARD[0]
#: the group reward manager, loaded by path in each reward worker; one worker, so a group's answers meet
GROUP_MANAGER = [
    "reward.reward_manager.source=importlib",
    "reward.reward_manager.name=GroupRewardManager",
    "reward.reward_manager.module.path=pkg://scripts.train.group_reward",
    "reward.num_workers=1",
]
PAIRWISE_REF = list(PAIRWISE_REF_REWARD)
TOURNAMENT = [PAIRWISE, f"{KWARGS}mode={Mode.TOURNAMENT}", *GROUP_MANAGER]

#: an arm that runs a reward mode as it is bears the mode's name (``Mode``)
MODE_ARMS = (Mode.JUDGE, Mode.ROUTE, Mode.PAIRWISE_REF, Mode.TOURNAMENT)
ARMS = {
    "rule": [],
    Mode.JUDGE: [],
    "random": [
        "reward.custom_reward_function.path=pkg://reward_fns.controls",
        "reward.custom_reward_function.name=random_reward",
    ],
    "format": [
        "reward.custom_reward_function.path=pkg://reward_fns.controls",
        "reward.custom_reward_function.name=format_only",
    ],
    Mode.ROUTE: [f"{KWARGS}mode={Mode.ROUTE}"],
    "flaky_fallback": [FLAKY, KWARGS + "fail_share=0.2"],
    "flaky_abstain": [FLAKY, KWARGS + "fail_share=0.2", KWARGS + "judge_failure=abstain"],
    Mode.PAIRWISE_REF: PAIRWISE_REF,
    Mode.TOURNAMENT: TOURNAMENT,
}
#: the judge task (``--judge-task``, ``scripts.workflows.pipeline.TASKS``) each judged arm's reward asks
NEEDS = {
    **dict.fromkeys((Mode.JUDGE, Mode.ROUTE, "flaky_fallback", "flaky_abstain"), "pointwise"),
    **dict.fromkeys((Mode.PAIRWISE_REF, Mode.TOURNAMENT), "pairwise_ref"),
}
JUDGED = tuple(NEEDS)  # rewarded by the trained judge (recipes/gsm8k_local_judge)
SEEDED = ("random",)  # controls whose randomness is seeded per run (reward_kwargs.seed = the run's data.seed)
#: the judged arm of the default ``rule,<arm>`` pair, per judge task
DEFAULT_JUDGED = {"pointwise": Mode.JUDGE, "pairwise_ref": Mode.PAIRWISE_REF}


def mismatched(arms: list[str], task: str) -> list[str]:
    """The arms of ``arms`` whose reward asks a judge other than the one ``task`` trains."""
    return [arm for arm in arms if NEEDS.get(arm, task) != task]
