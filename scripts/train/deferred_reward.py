"""The colocated judge's reward of a training step computed beside the log-prob stages, joined just before the
advantage (``verl_judge.deferred_reward``; off by default, ``recipes/base.yaml``):

    python -m scripts.launch gsm8k_local_judge judge_placement=colocated verl_judge.deferred_reward=true

Why: verl 0.9.1's legacy step (``verl/trainer/ppo/ray_trainer.py``, ``RayPPOTrainer.fit``) computes a colocated reward
model's reward in a stage of its own, ``reward`` (l.1561-1568: ``_compute_reward_colocate``, l.588-594, which waits
for ``RewardLoopManager.compute_rm_score``), before the old log-probs (l.1586) and the reference log-probs (l.1621),
though nothing reads the scores before the ``adv`` stage (l.1630-1635; ``compute_advantage`` l.1667).

With the switch on (``Deferral``, wired by ``scripts/train/seam.py``), in a training step only, the ``reward`` stage
starts ``compute_rm_score`` on a thread over a copy of the batch and hands the step a placeholder (``rm_scores`` NaN);
the ``adv`` stage joins it (at most ``DEADLINE_S``; a reward's exception is raised there), filling the placeholder and
the extra keys in place, and logs ``timing_s/reward_join`` (the reward's own duration: ``timing_s/reward_deferred``).

It needs a reward model colocated with the policy (``settings_errors``): otherwise verl 0.9.1 computes the reward in
the agent loop (``experimental/agent_loop/agent_loop.py`` l.968-1028) and there is nothing to defer; and a stage to
overlap (old log-probs outside ``bypass_mode``, the reference policy, the critic). With ``free_cache_engine=true``
``compute_rm_score`` wakes the judge within the call (``reward_loop.py`` l.344-345, 371-372), so its memory is taken
during the log-prob stages too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time

DEADLINE_S = 1800.0  # the join's wait; the stall watchdog (verl_judge.watchdog) may stop a stuck run sooner
STAGE, JOIN_STAGE = "reward", "adv"  # verl 0.9.1's marked_timer names in RayPPOTrainer.fit


def settings_errors(config) -> list[str]:
    """Why ``verl_judge.deferred_reward`` cannot work with ``config`` ([] when off or when it can)."""
    from omegaconf import OmegaConf

    def sel(key, default=None):
        try:
            return OmegaConf.select(config, key, default=default)
        except Exception:  # an interpolation that does not resolve here: the default
            return default

    on = sel("verl_judge.deferred_reward", False)
    if on is False or on is None:
        return []
    if on is not True:
        return [f"verl_judge.deferred_reward must be true or false, got {on!r}"]
    key = "verl_judge.deferred_reward=true"
    if sel("trainer.use_v1", False):
        return [f"{key} needs verl's legacy trainer (trainer.use_v1=false), where the verl_judge hooks run"]
    if not sel("reward.reward_model.enable", False):
        return [
            f"{key} needs a reward model colocated with the policy (judge_placement=colocated: "
            "reward.reward_model.enable=true): without one verl 0.9.1 computes the reward inside the agent loop as "
            "each rollout finishes, where the trainer cannot defer it"
        ]
    if sel("reward.reward_model.enable_resource_pool", False):
        return [
            f"{key} needs the judge colocated with the policy (reward.reward_model.enable_resource_pool=false, "
            "JUDGE_GPUS unset or 0): a judge on GPUs of its own is awaited inside the agent loop as each rollout "
            "finishes, where the trainer cannot defer it"
        ]
    bypass = bool(sel("algorithm.rollout_correction.bypass_mode", False))
    ref = bool(sel("algorithm.use_kl_in_reward", False) or sel("actor_rollout_ref.actor.use_kl_loss", False))
    critic = sel("critic.enable", None)
    critic = bool(critic) if critic is not None else str(sel("algorithm.adv_estimator", "")) == "gae"
    if bypass and not ref and not critic:
        return [
            f"{key} has no stage to overlap: algorithm.rollout_correction.bypass_mode=true skips the old log-probs, "
            "and there is no reference policy (actor_rollout_ref.actor.use_kl_loss and algorithm.use_kl_in_reward "
            "false) and no critic"
        ]
    return []


class _Pending:
    """One started reward: its future, what the step was handed, and (from ``extract_reward``) the batch and dict."""

    def __init__(self, step, size: int, placeholder, future):
        self.step, self.size, self.placeholder, self.future = step, size, placeholder, future
        self.batch = self.extras = None
        self.seconds: float | None = None


class Deferral:
    """The deferred reward of the step in flight (at most one). ``start`` in the ``reward`` stage, ``join`` at the
    ``adv`` stage; ``validating()`` says whether verl's ``_validate`` is running (its reward is never deferred)."""

    def __init__(self, validating=lambda: False, deadline_s: float | None = None, clock=time.monotonic, say=print):
        self.deadline_s = float(DEADLINE_S if deadline_s is None else deadline_s)
        self.validating, self.clock, self.say = validating, clock, say
        self.stages: list[str] = []  # the marked_timer stages entered and not yet left
        self.pending: _Pending | None = None
        self.started = 0

    def defers(self) -> bool:
        """Whether a ``_compute_reward_colocate`` call now is the training step's reward stage."""
        return bool(self.stages) and self.stages[-1] == STAGE and not self.validating()

    def start(self, manager, batch, step=None):
        """Start ``manager.compute_rm_score`` over a copy of ``batch`` on a thread; the placeholder ``DataProto``."""
        import torch
        from tensordict import TensorDict
        from verl import DataProto

        if self.pending is not None:
            raise RuntimeError(
                f"verl_judge.deferred_reward: the reward of step {self.pending.step} was never joined (the step "
                f"entered no '{JOIN_STAGE}' stage) and step {step}'s reward is starting"
            )
        snapshot = DataProto(
            batch=batch.batch.clone(), non_tensor_batch=dict(batch.non_tensor_batch), meta_info=dict(batch.meta_info)
        )
        placeholder = torch.full(batch.batch["responses"].shape, float("nan"), dtype=torch.float32)
        # REMAX: the baseline reward's keys are already here (DataProto.slice shares meta_info, protocol.py l.716, so
        # ray_trainer.py l.1532's union puts them into the batch's); verl's union would refuse the placeholder's []
        batch.meta_info.pop("reward_extra_keys", None)
        future: concurrent.futures.Future = concurrent.futures.Future()
        pending = _Pending(step, len(batch), placeholder, future)

        def run():
            future.set_running_or_notify_cancel()
            t0 = self.clock()
            try:
                result = manager.compute_rm_score(snapshot)
            except BaseException as e:  # raised at the join
                future.set_exception(e)
            else:
                pending.seconds = self.clock() - t0
                future.set_result(result)

        self.pending = pending
        threading.Thread(target=run, name=f"deferred-reward-step-{step}", daemon=True).start()
        if not self.started:
            self.say("[train] verl_judge.deferred_reward: the judge's reward runs beside the log-prob stages")
        self.started += 1
        rm = TensorDict({"rm_scores": placeholder}, batch_size=len(batch))
        return DataProto(batch=rm, non_tensor_batch={}, meta_info={"reward_extra_keys": []})

    def join(self, timing_raw: dict | None = None) -> float | None:
        """Wait for the pending reward (at most ``deadline_s``) and put it where the step reads it; the seconds waited
        (None: nothing pending). Its exception, if it raised one, is raised here."""
        import numpy as np

        p, self.pending = self.pending, None
        if p is None:
            return None
        what = (
            f"the deferred reward of step {p.step} (RewardLoopManager.compute_rm_score over {p.size} samples, "
            f"started in the '{STAGE}' stage)"
        )
        t0 = self.clock()
        done, _ = concurrent.futures.wait([p.future], timeout=self.deadline_s)
        if not done:
            raise TimeoutError(
                f"{what} did not finish within {self.deadline_s:g}s of waiting at the '{JOIN_STAGE}' stage; "
                "is the judge's vLLM server alive? (verl_judge.deferred_reward=false computes it in its own stage)"
            )
        try:
            out = p.future.result()
        except BaseException as e:
            e.add_note(f"raised by {what}; surfaced at its join before the advantage")
            raise
        waited = self.clock() - t0
        scores = out.batch["rm_scores"]
        if p.batch is None:
            raise RuntimeError(f"{what}: its placeholder never reached extract_reward, so the step cannot be given it")
        if scores.shape != p.placeholder.shape or scores.dtype != p.placeholder.dtype:
            raise RuntimeError(
                f"{what} returned rm_scores of {tuple(scores.shape)} {scores.dtype}; the placeholder the step holds "
                f"is {tuple(p.placeholder.shape)} {p.placeholder.dtype}"
            )
        p.placeholder.copy_(scores)
        keys = list(out.meta_info.get("reward_extra_keys", []))
        columns = {k: out.non_tensor_batch[k] for k in keys}
        p.extras.update(columns)
        p.batch.non_tensor_batch.update({k: np.array(v) for k, v in columns.items()})
        p.batch.meta_info["reward_extra_keys"] = keys
        if timing_raw is not None:
            timing_raw["reward_join"] = waited
            timing_raw["reward_deferred"] = p.seconds
        return waited

    def check_joined(self, where: str) -> None:
        """Refuse to go on where the reward is read (``where``) while it is still pending."""
        if self.pending is not None:
            raise RuntimeError(
                f"verl_judge.deferred_reward: {where} reached with step {self.pending.step}'s reward not joined "
                f"(verl's step entered no '{JOIN_STAGE}' stage before it); its scores would be the placeholder's NaN"
            )

    def timer(self, marked_timer):
        """verl's ``marked_timer`` that keeps the stages entered and joins the reward on entering ``adv``."""

        @contextlib.contextmanager
        def stage_timer(name, timing_raw, *args, **kwargs):
            if name == JOIN_STAGE:
                self.join(timing_raw)
            self.stages.append(name)
            try:
                with marked_timer(name, timing_raw, *args, **kwargs):
                    yield
            finally:
                self.stages.pop()

        return stage_timer

    def extract(self, extract_reward):
        """verl's ``extract_reward`` that keeps the batch and the dict it gave the step when it read the placeholder."""

        def extract_and_keep(batch):
            tensor, extras = extract_reward(batch)
            p = self.pending
            if p is not None and p.batch is None and tensor is p.placeholder:  # filled at the join
                p.batch, p.extras = batch, extras
            return tensor, extras

        return extract_and_keep
