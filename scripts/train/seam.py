"""Where the verl_judge hooks meet verl 0.9.1's legacy trainer, in one place.

    python -m scripts.train --config-path "$PWD/recipes/<recipe>" --config-name config [overrides]

``install(config)`` runs in the process that trains: verl's task runner then builds ``JudgeTrainer`` (a
``RayPPOTrainer`` adding the pair sampler, the wait for the judge server, validation's group sizes, the deferred
reward's start), and the module functions ``fit`` calls by name are wrapped. ``PATCHED`` is every verl name the
project replaces, with the reason; nothing else of verl is touched.
"""

from __future__ import annotations

import time

from reward_fns.judge_options import Mode
from scripts.train import deferred_reward, hooks

#: every verl name the project replaces (module -> name -> why); the tests restore them after each test from this table
PATCHED = {
    "verl.trainer.main_ppo_v0": {
        "RayPPOTrainer": "the task runner builds its trainer by this name: JudgeTrainer, verl's class with the hooks' "
        "methods (pair sampler, judge-server wait, validation group sizes, deferred reward start); in a Ray actor "
        "the runner also names it in its shipped copy of this module's names (scripts/train/trainer.py)",
    },
    "verl.trainer.ppo.ray_trainer": {
        "compute_advantage": "GRPO groups that hold both orders of a pair, abstained samples out of their groups, and "
        "no advantage from a deferred reward not yet joined",
        "compute_data_metrics": "the step metrics read from the batch verl's own metrics read: reward keys, judge "
        "health, identical groups; the fail-fast and hacking watches",
        "pad_dataproto_to_divisor": "validation pads with copies of its first rows: each copy a group of its own, so "
        "the group reward manager neither waits for it nor scores against it",
        "marked_timer": "deferred reward only: which stage a reward call is in, and the join on entering 'adv'",
        "extract_reward": "deferred reward only: the dict of extra keys the step holds, filled at the join (verl "
        "writes it into the batch and the rollout dump)",
    },
    "verl.utils.torch_functional": {
        "logprobs_from_logits_v2": "without flash-attn, chunked log-probs instead of one kernel per token "
        "(scripts/train/fast_logprobs.py, loaded in every worker by verl's model.external_lib)",
    },
}


class Seam:
    """One run's hooks: its settings (``config.verl_judge``), watches and deferred reward, and what ``fit`` is doing
    (the tokenizer ``route_reading`` decodes with; whether it is validating)."""

    def __init__(self, config):
        self.opts, self.fail_fast, self.hacking, self.pair_groups = hooks.settings(config)
        self.route = hooks.reward_mode(config) == Mode.ROUTE
        self.seed = config.data.get("seed") or 0
        self.tokenizer = None
        self.validating = False
        on = self.opts.get("deferred_reward", False)
        self.deferral = deferred_reward.Deferral(lambda: self.validating) if on else None

    def advantage(self, compute_advantage):
        """verl's ``compute_advantage`` over pair groups, with abstained samples out of their groups and masked."""

        def grouped_advantage(data, *args, **kwargs):
            if self.deferral is not None:
                self.deferral.check_joined("compute_advantage")
            nt = data.non_tensor_batch
            abstained = hooks.abstained_mask(nt)
            estimator = kwargs.get("adv_estimator", args[0] if args else None)
            pairs = self.pair_groups and "extra_info" in nt
            if "uid" not in nt or (not pairs and abstained is None):
                return compute_advantage(data, *args, **kwargs)
            uid = nt["uid"]
            grouped = hooks.pair_ids(nt["extra_info"], uid) if pairs else uid
            nt["uid"] = hooks.leave_out(grouped, abstained) if abstained is not None else grouped
            try:
                out = compute_advantage(data, *args, **kwargs)
            finally:
                nt["uid"] = grouped
                if pairs:
                    nt["prompt_uid"] = uid
            if abstained is not None:
                groups = str(getattr(estimator, "value", estimator)) != "gae"  # GAE has no groups: a critic's baseline
                hooks.mask_out(data, abstained, hooks.lone_survivors(grouped, abstained) if groups else None)
            return out

        return grouped_advantage

    def data_metrics(self, compute_data_metrics):
        """verl's step metrics plus the hooks' (``hooks.reward_metrics``) and ``perf/step_end_unix_s`` (the clock as
        the step's metrics are computed, after the step and its validation: runs side by side compare the steps they
        ran together), then the watches."""

        def with_judge_metrics(batch, use_critic=True):
            metrics = compute_data_metrics(batch=batch, use_critic=use_critic)
            nt = batch.non_tensor_batch
            abstained = hooks.abstained_mask(nt)
            if abstained is not None:
                metrics.update(hooks.scored_score_metrics(compute_data_metrics, batch, abstained))
            reading = hooks.route_reading(batch, self.tokenizer) if self.route else None
            keys = batch.meta_info.get("reward_extra_keys") or ()  # what verl's extract_reward read
            metrics.update(hooks.reward_metrics({k: nt[k] for k in keys if k in nt}, reading, nt.get("uid")))
            if "uid" in nt and "token_level_scores" in batch.batch.keys():
                scores = batch.batch["token_level_scores"].sum(-1).float().cpu().numpy()
                metrics["grpo/identical_reward_groups"] = hooks.identical_group_share(scores, nt["uid"])
            metrics["perf/step_end_unix_s"] = time.time()
            self.fail_fast.update(metrics)
            if self.hacking is not None:
                self.hacking.update(metrics)
            return metrics

        return with_judge_metrics

    def pad(self, pad_dataproto_to_divisor):
        """verl's validation padding, each padding copy a group of one (``PATCHED`` says why)."""

        def pad_apart(data, size_divisor):
            padded, pad_size = pad_dataproto_to_divisor(data, size_divisor)
            nt = padded.non_tensor_batch
            if self.validating and pad_size and "uid" in nt and hooks.GROUP_EXPECTED in nt:
                first = len(nt["uid"]) - pad_size
                uids, expected = nt["uid"].copy(), nt[hooks.GROUP_EXPECTED].copy()
                for k in range(first, len(uids)):
                    uids[k], expected[k] = f"{uids[k]}#pad{k - first}", 1
                nt["uid"], nt[hooks.GROUP_EXPECTED] = uids, expected
            return padded, pad_size

        return pad_apart


def judge_trainer(base, seam: Seam):
    """``base`` (verl's ``RayPPOTrainer``) with the hooks' methods, for one run's ``seam``."""

    class JudgeTrainer(base):
        """verl's legacy PPO trainer with the verl_judge hooks (``scripts/train/seam.py``)."""

        def __init__(self, *args, **kwargs):
            if seam.pair_groups:  # both orders of a pair in one batch (verl_judge.pair_groups)
                kwargs["train_sampler"] = hooks.PairSampler(kwargs["train_dataset"], seed=seam.seed)
            super().__init__(*args, **kwargs)

        def fit(self, *args, **kwargs):
            seam.tokenizer = getattr(self, "tokenizer", None)  # route_reading decodes the responses with it
            hooks.wait_for_judge(seam.opts)
            return super().fit(*args, **kwargs)

        def _validate(self, *args, **kwargs):
            seam.validating = True
            try:
                return super()._validate(*args, **kwargs)
            finally:
                seam.validating = False

        def _get_gen_batch(self, batch):
            """In validation (the batch already repeated ``val_kwargs.n`` times, where ``fit`` repeats ``rollout.n``
            times after this call) each sample's group size, which the group reward manager waits for."""
            out = super()._get_gen_batch(batch)
            if seam.validating and "uid" in out.non_tensor_batch:
                out.non_tensor_batch[hooks.GROUP_EXPECTED] = hooks.group_counts(out.non_tensor_batch["uid"])
            return out

        def _compute_reward_colocate(self, batch):
            if seam.deferral is None or not seam.deferral.defers():
                return super()._compute_reward_colocate(batch)
            assert self.reward_loop_manager is not None, "RewardLoopManager is None"
            return seam.deferral.start(self.reward_loop_manager, batch, step=getattr(self, "global_steps", None))

    return JudgeTrainer


def install(config) -> Seam:
    """Put the hooks into verl's legacy trainer modules in this process, as ``config.verl_judge`` says; the run's
    ``Seam``. A bad setting raises ``ValueError`` naming it (``hooks.settings_errors`` asks the same before a run)."""
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    seam = Seam(config)
    main_ppo_v0.RayPPOTrainer = judge_trainer(ray_trainer.RayPPOTrainer, seam)
    ray_trainer.compute_advantage = seam.advantage(ray_trainer.compute_advantage)
    ray_trainer.compute_data_metrics = seam.data_metrics(ray_trainer.compute_data_metrics)
    ray_trainer.pad_dataproto_to_divisor = seam.pad(ray_trainer.pad_dataproto_to_divisor)
    if seam.deferral is not None:
        ray_trainer.marked_timer = seam.deferral.timer(ray_trainer.marked_timer)
        ray_trainer.extract_reward = seam.deferral.extract(ray_trainer.extract_reward)
    return seam
