"""scripts/launch/config_checks.batch_errors on plain configs: a micro-batch must divide each GPU's whole share, so a
share that the GPUs cannot split evenly (``size % gpus``) is an error even where its floor would divide. Also
value_errors on plain configs: a key that is absent, missing (``???``) or does not resolve is not a range error."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from scripts.launch import config_checks

ACTOR, ROLLOUT, REF = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
)
TAIL = "verl would stop at its first update; use a divisor of that"


def config(gpus, nodes, n, mini, batch, micro, dynamic=False):
    """``micro``: (actor, rollout, ref) micro-batch sizes per GPU."""
    actor, rollout, ref = micro
    return OmegaConf.create(
        {
            "trainer": {"n_gpus_per_node": gpus, "nnodes": nodes},
            "data": {"train_batch_size": batch},
            "actor_rollout_ref": {
                "actor": {
                    "ppo_mini_batch_size": mini,
                    "ppo_micro_batch_size_per_gpu": actor,
                    "use_dynamic_bsz": dynamic,
                },
                "rollout": {"n": n, "log_prob_micro_batch_size_per_gpu": rollout, "log_prob_use_dynamic_bsz": False},
                "ref": {"log_prob_micro_batch_size_per_gpu": ref, "log_prob_use_dynamic_bsz": False},
            },
        }
    )


@pytest.mark.parametrize(
    "case, gpus, nodes, n, mini, batch, micro, dynamic, errors",
    [
        ("every share divides", 2, 1, 4, 1, 2, (2, 4, 4), False, []),
        # the actor's 1 x 3 = 3 samples over 2 GPUs: 1.5 a GPU; its floor (1) would divide by 1, the share does not
        (
            "mini-batch does not split over the GPUs",
            2,
            1,
            3,
            1,
            2,
            (1, 3, 3),
            False,
            [f"{ACTOR}=1 does not divide the actor's mini-batch (1 x 3) over 2 GPU(s) = 1.5 a GPU: {TAIL}"],
        ),
        # 2 nodes x 2 GPUs: 2 x 5 = 10 samples (2.5 a GPU, floor 2) and 3 x 5 = 15 (3.75 a GPU, floor 3)
        (
            "nothing splits over 4 GPUs",
            2,
            2,
            5,
            2,
            3,
            (2, 3, 3),
            False,
            [
                f"{ACTOR}=2 does not divide the actor's mini-batch (2 x 5) over 4 GPU(s) = 2.5 a GPU: {TAIL}",
                f"{ROLLOUT}=3 does not divide a step's samples (3 x 5) over 4 GPU(s) = 3.75 a GPU: {TAIL}",
                f"{REF}=3 does not divide a step's samples (3 x 5) over 4 GPU(s) = 3.75 a GPU: {TAIL}",
            ],
        ),
        # whole shares that the micro-batch does not divide: 2 x 4 / 2 = 4 a GPU, micro 3
        (
            "micro-batch does not divide a whole share",
            2,
            1,
            4,
            2,
            2,
            (3, 2, 4),
            False,
            [f"{ACTOR}=3 does not divide the actor's mini-batch (2 x 4) over 2 GPU(s) = 4 a GPU: {TAIL}"],
        ),
        # dynamic batch sizes: the actor's micro-batch does not apply
        ("dynamic actor batches", 2, 1, 3, 1, 2, (1, 3, 3), True, []),
        # a value missing: nothing to check here (value_errors reports it)
        ("no GPU count", None, 1, 3, 1, 2, (1, 3, 3), False, []),
    ],
)
def test_micro_batches_divide_each_gpus_whole_share(case, gpus, nodes, n, mini, batch, micro, dynamic, errors):
    assert config_checks.batch_errors(config(gpus, nodes, n, mini, batch, micro, dynamic)) == errors


NO_SOURCE = (
    "verl_judge.watchdog has no step source: trainer.logger=[] has neither console nor file, so every run would be "
    "stopped as stalled after startup_s; add console or file to trainer.logger, or set verl_judge.watchdog.enable=false"
)
UNRESOLVED = "${oc.env:VERL_JUDGE_UNSET_VAR}"


@pytest.mark.parametrize(
    "check, values, errors",
    [
        ("value_errors", {"trainer": {"n_gpus_per_node": 2, "nnodes": 1}}, [NO_SOURCE]),
        ("value_errors", {"trainer": {"nnodes": 1, "logger": ["console"]}, "data": {"train_batch_size": "???"}}, []),
        ("value_errors", {"trainer": {"nnodes": 0, "logger": "file"}}, ["trainer.nnodes=0: must be an integer >= 1"]),
        ("value_errors", {"trainer": {"nnodes": UNRESOLVED, "logger": "file"}}, []),  # verl's own checks report it
        # a watchdog setting or the loggers do not resolve: resolution_errors reports it
        ("watchdog_errors", {"trainer": {"logger": []}, "verl_judge": {"watchdog": {"step_s": UNRESOLVED}}}, []),
        ("watchdog_errors", {"trainer": {"logger": [UNRESOLVED]}}, []),
        ("watchdog_errors", {"trainer": {"logger": []}, "verl_judge": {"watchdog": None}}, [NO_SOURCE]),
    ],
)
def test_absent_or_unresolved_values_are_not_range_errors(check, values, errors):
    assert getattr(config_checks, check)(OmegaConf.create(values)) == errors
