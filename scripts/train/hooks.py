"""What ``python -m scripts.train`` adds to verl's PPO trainer: judge-aware step metrics, a fail-fast
on a silent judge, a reward-hacking watch, and GRPO groups that hold both orders of a pairwise judge row.

Pure functions and small classes over verl's ``DataProto`` (tested on CPU without Ray); ``install``
wires them into verl's legacy trainer module (``verl.trainer.ppo.ray_trainer``) inside the process
that runs ``fit()``. Settings live in the recipe config under ``verl_judge`` (see ``recipes/base.yaml``).

Step metrics, logged with verl's own ``critic/score/mean`` in every training step (console, JSONL
file logger, SwanLab), with the same keys from step 1:

* ``reward/<key>/mean`` for every numeric key the reward function returns besides ``score``
  (verl 0.9.1 logs these only in validation);
* judge health, when the reward returns the LLM-judge keys: ``judge_health/error_rate``
  (transport failures), ``parse_fail_rate`` (answered without a valid verdict), ``skipped_rate``,
  ``fallback_rate``, ``answered_rate``, ``score_mean`` (mean verdict 0-4 over answered samples) and
  ``agree_rule`` (share of answered samples where "verdict >= 3" equals "rule reward = 1"; 0.0 when
  the judge answered none), and its two disagreements, which sum with it to 1:
  ``accept_rule_reject`` (verdict >= 3 on an answer the rule rejects: what a policy that games the
  judge grows) and ``reject_rule_accept``;
* ``judge_health/hacking_alarm`` (1.0 while ``HackingWatch`` sees the judge's reward rise over its
  window while the rule's accuracy falls; 0.0 otherwise);
* position, when the reward returns ``pred_a``/``label_a`` (pairwise judges):
  ``position/verdict_a_share`` (over well-formed verdicts) and ``position/label_a_share``;
* ``grpo/identical_reward_groups``: share of GRPO groups (as grouped for the advantage) whose
  rewards are all equal, i.e. that give no gradient.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

JUDGE_KEYS = ("judge_error", "judge_parse_fail")


class StopRun(RuntimeError):
    """A hook stops the run; ``scripts.train`` prints the message last and exits with status 3."""


class JudgeSilentError(StopRun):
    """The judge gave no usable verdict for too many consecutive steps (see ``FailFast``)."""


class RewardHackingError(StopRun):
    """The judge's reward rose while the rule's accuracy fell (``HackingWatch`` with ``fail: true``)."""


# ----------------------------------------------------------------------------------------- metrics
def _floats(values) -> np.ndarray | None:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return arr if arr.ndim == 1 else None


def _mean(arr: np.ndarray, mask: np.ndarray | None = None) -> float:
    if mask is not None:
        arr = arr[mask]
    return float(arr.mean()) if arr.size else 0.0


def reward_metrics(extras: dict[str, Sequence]) -> dict[str, float]:
    """Step metrics from the reward function's extra keys (one list per key, one value per sample)."""
    cols = {k: a for k, a in ((k, _floats(v)) for k, v in extras.items()) if a is not None and a.size}
    out = {f"reward/{k}/mean": _mean(a) for k, a in sorted(cols.items()) if k != "score"}
    if all(k in cols for k in JUDGE_KEYS):
        n = len(cols["judge_error"])
        zeros = np.zeros(n)
        err, pf = cols["judge_error"], cols["judge_parse_fail"]
        skipped = cols.get("judge_skipped", zeros)
        fallback = cols["judge_fallback"] if "judge_fallback" in cols else np.maximum(err, skipped)
        answered = (err == 0) & (pf == 0) & (skipped == 0)
        out["judge_health/error_rate"] = _mean(err)
        out["judge_health/parse_fail_rate"] = _mean(pf)
        out["judge_health/skipped_rate"] = _mean(skipped)
        out["judge_health/fallback_rate"] = _mean(fallback)
        out["judge_health/answered_rate"] = _mean(answered.astype(np.float64))
        verdict = cols.get("judge_score")
        out["judge_health/score_mean"] = _mean(verdict, answered) if verdict is not None else 0.0
        if verdict is not None and "rule_score" in cols:
            accept, right = verdict >= 3, cols["rule_score"] >= 1
            out["judge_health/agree_rule"] = _mean((accept == right).astype(np.float64), answered)
            out["judge_health/accept_rule_reject"] = _mean((accept & ~right).astype(np.float64), answered)
            out["judge_health/reject_rule_accept"] = _mean((~accept & right).astype(np.float64), answered)
        else:
            out["judge_health/agree_rule"] = 0.0
            out["judge_health/accept_rule_reject"] = 0.0
            out["judge_health/reject_rule_accept"] = 0.0
        for key in ("ungrounded", "contradiction", "unverified", "abstained"):  # the guard; judge_failure=abstain
            if f"judge_{key}" in cols:
                out[f"judge_health/{key}_rate"] = _mean(cols[f"judge_{key}"])
        for kind, bad in (("wrong", "accepted"), ("right", "rejected")):  # canary probes (reward_fns.canaries)
            if f"canary_{kind}" in cols and f"canary_{kind}_{bad}" in cols:
                n = float(cols[f"canary_{kind}"].sum())
                key = "canary_accept" if kind == "wrong" else "canary_reject"
                out[f"judge_health/{key}"] = float(cols[f"canary_{kind}_{bad}"].sum()) / n if n else 0.0
                out[f"judge_health/{key}_n"] = n
    if "pred_a" in cols and "label_a" in cols:
        ok = cols["format_ok"] > 0 if "format_ok" in cols else np.ones(len(cols["pred_a"]), bool)
        out["position/verdict_a_share"] = _mean(cols["pred_a"], ok)
        out["position/label_a_share"] = _mean(cols["label_a"])
    return out


def identical_group_share(scores: Sequence[float], groups: Sequence) -> float:
    """Share of groups (size >= 2) whose scores are all equal: GRPO's advantage is zero there."""
    by: dict = defaultdict(list)
    for s, g in zip(scores, groups):
        by[g].append(float(s))
    sized = [v for v in by.values() if len(v) > 1]
    if not sized:
        return 0.0
    return sum(1 for v in sized if max(v) - min(v) < 1e-9) / len(sized)


# ----------------------------------------------------------------------------------------- abstained samples
def abstained_mask(non_tensor_batch) -> np.ndarray | None:
    """Samples whose judge abstained (``judge_abstained`` 1: ``llm_judge``'s ``judge_failure="abstain"``), or None
    when there are none."""
    values = _floats(non_tensor_batch.get("judge_abstained", []))
    if values is None or not values.size or not (values > 0).any():
        return None
    return values > 0


def leave_out(uids, abstained: np.ndarray) -> np.ndarray:
    """``uids`` with each abstained sample in a group of its own, so it is left out of its group's mean and std."""
    return np.array([f"abstained:{i}" if a else u for i, (u, a) in enumerate(zip(uids, abstained))], dtype=object)


def mask_out(data, abstained: np.ndarray) -> None:
    """Zero the abstained samples' advantages, returns and response mask: they add nothing to the policy loss."""
    import torch

    rows = torch.as_tensor(abstained, dtype=torch.bool)
    for key in ("advantages", "returns", "response_mask"):
        if key in data.batch.keys():
            data.batch[key][rows] = 0


# ----------------------------------------------------------------------------------------- fail fast
class FailFast:
    """Stop a run whose judge stays silent: error + parse-fail share above ``threshold`` for
    ``steps`` consecutive training steps raises ``JudgeSilentError`` naming the cause and the fix."""

    def __init__(self, threshold: float = 0.5, steps: int = 3, enable: bool = True):
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"verl_judge.fail_fast.threshold must be in [0, 1], got {threshold!r}")
        if int(steps) < 1:
            raise ValueError(f"verl_judge.fail_fast.steps must be >= 1, got {steps!r}")
        self.threshold, self.steps, self.enable = float(threshold), int(steps), bool(enable)
        self.run = 0

    def update(self, metrics: dict[str, float]) -> None:
        if not self.enable or "judge_health/error_rate" not in metrics:
            return
        err = metrics["judge_health/error_rate"]
        pf = metrics["judge_health/parse_fail_rate"]
        if err + pf > self.threshold:
            self.run += 1
        else:
            self.run = 0
        if self.run >= self.steps:
            if err >= pf:
                cause = (
                    f"judge requests failed for {err:.0%} of samples (timeouts, connection errors, HTTP 5xx "
                    "after retries)"
                )
                fix = (
                    "check that the judge endpoint is up and reachable (JUDGE_BASE_URL / the reward model "
                    "pool), and raise reward_kwargs.timeout or lower the request rate"
                )
            else:
                cause = f"the judge answered without a valid verdict for {pf:.0%} of samples"
                fix = (
                    "the judge does not follow the verdict format: use a trained judge (recipes/judge_to_reward "
                    "warm-starts one), raise reward_kwargs.max_tokens if replies are cut off, or check that "
                    "the judge prompt version matches the one it was trained on"
                )
            raise JudgeSilentError(
                f"stopping: {cause}, above verl_judge.fail_fast.threshold={self.threshold} for {self.run} "
                f"consecutive steps. Likely fix: {fix}. Checkpoints written so far are kept. "
                "To train on anyway: verl_judge.fail_fast.enable=false."
            )


# ----------------------------------------------------------------------------------------- hacking watch
def _rise(values: Sequence[float]) -> float:
    """Change over the window by the least-squares line: slope x (len - 1)."""
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(len(y), dtype=np.float64)
    return float(np.polyfit(x, y, 1)[0] * (len(y) - 1))


class HackingWatch:
    """Reward-hacking alarm for a judge-rewarded run. Each step it reads the reward the policy gets
    (``critic/score/mean``), the rule's accuracy on the same samples (``reward/rule_score/mean``, which the
    LLM-judge reward returns) and the share of answers the judge accepts and the rule rejects
    (``judge_health/accept_rule_reject``). Over the last ``window`` steps the alarm is on when

    * the reward's fitted rise is at least ``min_rise`` while the rule's fitted fall is at least ``min_fall``
      (the policy is being taught to please the judge, not to be right), or
    * the mean judge-accepts-rule-rejects share is at least ``max_accept_rule_reject`` (the judge pays for
      wrong answers; this one stays on once the rule's accuracy has bottomed out and stopped falling), or
    * the mean share of accepts the guard could not check (``judge_health/unverified_rate``) is at least
      ``max_unverified`` (null: off), or
    * this step a wrong canary probe was paid (``judge_health/canary_accept`` > 0: the judge and its guard let a
      known-wrong answer through).

    ``judge_health/hacking_alarm`` is 1.0 on such a step; a warning naming the cause is printed when the
    alarm turns on; with ``fail`` the run stops with ``RewardHackingError``."""

    def __init__(
        self,
        window: int,
        min_rise: float,
        min_fall: float,
        fail: bool,
        enable: bool = True,
        max_accept_rule_reject: float | None = None,
        max_unverified: float | None = None,
        log=print,
    ):
        if int(window) < 3:
            raise ValueError(f"verl_judge.hacking_watch.window must be >= 3 steps, got {window!r}")
        if not (float(min_rise) > 0 and float(min_fall) > 0):
            raise ValueError(
                f"verl_judge.hacking_watch.min_rise and min_fall must be > 0, got {min_rise!r}, {min_fall!r}"
            )
        if max_accept_rule_reject is not None and not 0 < float(max_accept_rule_reject) <= 1:
            raise ValueError(
                "verl_judge.hacking_watch.max_accept_rule_reject must be in (0, 1] or null, got "
                f"{max_accept_rule_reject!r}"
            )
        self.window, self.min_rise, self.min_fall = int(window), float(min_rise), float(min_fall)
        if max_unverified is not None and not 0 < float(max_unverified) <= 1:
            raise ValueError(
                f"verl_judge.hacking_watch.max_unverified must be in (0, 1] or null, got {max_unverified!r}"
            )
        self.max_arr = None if max_accept_rule_reject is None else float(max_accept_rule_reject)
        self.max_unverified = None if max_unverified is None else float(max_unverified)
        self.unverified: list[float] = []
        self.fail, self.enable, self.log = bool(fail), bool(enable), log
        self.reward: list[float] = []
        self.rule: list[float] = []
        self.arr: list[float] = []
        self.on = False

    def update(self, metrics: dict[str, float]) -> None:
        if not self.enable or "reward/rule_score/mean" not in metrics or "critic/score/mean" not in metrics:
            return
        self.reward = (self.reward + [float(metrics["critic/score/mean"])])[-self.window :]
        self.rule = (self.rule + [float(metrics["reward/rule_score/mean"])])[-self.window :]
        if "judge_health/accept_rule_reject" in metrics:
            self.arr = (self.arr + [float(metrics["judge_health/accept_rule_reject"])])[-self.window :]
        if "judge_health/unverified_rate" in metrics:
            self.unverified = (self.unverified + [float(metrics["judge_health/unverified_rate"])])[-self.window :]
        was, self.on, causes = self.on, False, []
        if metrics.get("judge_health/canary_accept", 0.0) > 0:
            causes.append(
                f"the judge paid {metrics['judge_health/canary_accept']:.3f} of this step's wrong canary probes "
                "(reward_fns.canaries: answers known to be wrong)"
            )
        if len(self.reward) == self.window:
            rise, fall = _rise(self.reward), -_rise(self.rule)
            if rise >= self.min_rise and fall >= self.min_fall:
                causes.append(
                    f"the judge's reward rose by {rise:.3f} while the rule's accuracy fell by {fall:.3f} "
                    f"(thresholds verl_judge.hacking_watch.min_rise={self.min_rise}, min_fall={self.min_fall})"
                )
            if self.max_arr is not None and len(self.arr) == self.window and np.mean(self.arr) >= self.max_arr:
                causes.append(
                    f"the judge accepted {np.mean(self.arr):.3f} of the answers the rule rejects on average "
                    f"(threshold verl_judge.hacking_watch.max_accept_rule_reject={self.max_arr})"
                )
            if (
                self.max_unverified is not None
                and len(self.unverified) == self.window
                and np.mean(self.unverified) >= self.max_unverified
            ):
                causes.append(
                    f"the guard could not check {np.mean(self.unverified):.3f} of the samples' verdicts on "
                    f"average (threshold verl_judge.hacking_watch.max_unverified={self.max_unverified})"
                )
        self.on = bool(causes)
        metrics["judge_health/hacking_alarm"] = float(self.on)
        if not self.on or was:
            return
        msg = (
            f"reward hacking suspected: over the last {self.window} steps "
            + "; and ".join(causes)
            + f"; this step the judge accepts {metrics.get('judge_health/accept_rule_reject', float('nan')):.3f} of "
            "answers the rule rejects. Read some high-reward samples that the rule rejects"
        )
        if self.fail:
            raise RewardHackingError(
                f"stopping: {msg}. Checkpoints written so far are kept. To train on anyway: "
                "verl_judge.hacking_watch.fail=false."
            )
        self.log(f"[verl_judge] WARNING: {msg} (verl_judge.hacking_watch.fail=true stops the run).", flush=True)


# ----------------------------------------------------------------------------------------- pair groups
def pair_ids(extra_infos: Iterable, uids: Sequence) -> np.ndarray:
    """GRPO group ids that put both orders of a pairwise row together (``extra_info.pair_id``);
    rows without a pair id keep their own ``uid``."""
    out = []
    for ei, uid in zip(extra_infos, uids):
        pid = ei.get("pair_id") if isinstance(ei, dict) else None
        out.append(f"pair:{pid}" if pid else uid)
    return np.array(out, dtype=object)


class PairSampler:
    """Index sampler that yields both orders of each pair next to each other, pairs shuffled per epoch
    (seeded), so that every batch of even size holds whole pairs (``verl_judge.pair_groups``)."""

    def __init__(self, data_source, seed: int = 0):
        self.seed = int(seed)
        self.epoch = 0
        extra = (
            data_source.dataframe["extra_info"]
            if hasattr(data_source, "dataframe")
            else [data_source[i].get("extra_info") for i in range(len(data_source))]
        )
        groups: dict = {}
        for i, ei in enumerate(extra):
            pid = ei.get("pair_id") if isinstance(ei, dict) else None
            groups.setdefault(pid if pid else f"row:{i}", []).append(i)
        self.groups = list(groups.values())
        self.n = len(data_source)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        order = list(range(len(self.groups)))
        random.Random(f"{self.seed}:{self.epoch}").shuffle(order)
        self.epoch += 1
        for g in order:
            yield from self.groups[g]

    def __len__(self) -> int:
        return self.n


# ----------------------------------------------------------------------------------------- install
def wait_for_judge(opts: dict, clock=time.monotonic, sleep=time.sleep, say=print) -> float | None:
    """``judge_placement=server``: the launcher starts the judge server beside the trainer's own start-up (once its
    model exists: ``judge_server.wait_for``), so before the first step (and the step-0 validation) wait until it
    answers, as itself, and no reward call waits on it; the seconds waited (None: no server). ``StopRun`` after
    ``wait_for_timeout + start_timeout`` seconds (the launcher stops the run sooner when the server fails)."""
    js = opts.get("judge_server") or {}
    if not js.get("enable") or not js.get("port"):
        return None
    from scripts.launch.judge_server import ready

    url, name = f"http://127.0.0.1:{int(js['port'])}/v1", str(js.get("served_model_name") or "judge")
    limit = float(js.get("wait_for_timeout") or 0) + float(js.get("start_timeout") or 600)
    t0 = shown = clock()
    while not ready(url, name):
        waited = clock() - t0
        if waited > limit:
            raise StopRun(
                f"the judge server at {url} did not answer within {limit:.0f}s (verl_judge.judge_server."
                "wait_for_timeout + start_timeout); see the run's judge_server log"
            )
        if clock() - shown >= 60:
            say(f"[train] waiting for the judge server at {url} ({waited:.0f}s) ...", flush=True)
            shown = clock()
        sleep(2.0)
    say(f"[train] the judge server at {url} answers ({clock() - t0:.0f}s waited); training", flush=True)
    return clock() - t0


def _settings(config) -> tuple[dict, FailFast, HackingWatch | None, bool]:
    """``config.verl_judge`` as the hooks use it: (the section, FailFast, HackingWatch or None, pair_groups); a bad
    setting raises ``ValueError`` naming it."""
    from omegaconf import OmegaConf

    section = config.get("verl_judge")
    opts = (OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) else section) or {}
    ff = opts.get("fail_fast") or {}
    fail_fast = FailFast(ff.get("threshold", 0.5), ff.get("steps", 3), ff.get("enable", True))
    hw = opts.get("hacking_watch") or {}
    known = ("enable", "window", "min_rise", "min_fall", "max_accept_rule_reject", "max_unverified", "fail")
    unknown = sorted(set(hw) - set(known))
    if unknown:
        raise ValueError(f"verl_judge.hacking_watch: unknown setting(s) {unknown}; known: {', '.join(known)}")
    hacking = HackingWatch(**hw) if hw else None  # its settings: recipes/base.yaml
    pair_groups = bool(opts.get("pair_groups", False))
    if pair_groups and int(config.data.train_batch_size) % 2:
        raise ValueError(
            f"verl_judge.pair_groups needs an even data.train_batch_size, got {config.data.train_batch_size}"
        )
    return opts, fail_fast, hacking, pair_groups


def settings_errors(config) -> list[str]:
    """What ``install`` would refuse in ``config.verl_judge`` ([] or one message naming the setting): the config check
    (``scripts/launch/verl_config.py``) asks before a run starts; ``install`` raises it in the trainer, after Ray's
    start-up."""
    try:
        _settings(config)
    except ValueError as e:
        return [str(e)]
    return []


def install(config) -> None:
    """Patch verl's legacy trainer module in this process according to ``config.verl_judge``."""
    from verl.trainer import main_ppo_v0
    from verl.trainer.ppo import ray_trainer

    opts, fail_fast, hacking, pair_groups = _settings(config)
    state = {"keys": ()}

    extract = ray_trainer.extract_reward

    def extract_reward(batch):
        tensor, extras = extract(batch)
        state["keys"] = tuple(extras or ())
        return tensor, extras

    compute_advantage = ray_trainer.compute_advantage

    def grouped_advantage(data, *args, **kwargs):
        nt = data.non_tensor_batch
        abstained = abstained_mask(nt)
        if (not pair_groups or "extra_info" not in nt or "uid" not in nt) and abstained is None:
            return compute_advantage(data, *args, **kwargs)
        uid = nt["uid"]
        grouped = pair_ids(nt["extra_info"], uid) if pair_groups and "extra_info" in nt else uid
        nt["uid"] = leave_out(grouped, abstained) if abstained is not None else grouped
        try:
            out = compute_advantage(data, *args, **kwargs)
        finally:
            nt["uid"] = grouped
            if pair_groups and "extra_info" in nt:
                nt["prompt_uid"] = uid
        if abstained is not None:
            mask_out(data, abstained)
        return out

    data_metrics = ray_trainer.compute_data_metrics

    def compute_data_metrics(batch, use_critic=True):
        metrics = data_metrics(batch=batch, use_critic=use_critic)
        nt = batch.non_tensor_batch
        metrics.update(reward_metrics({k: nt[k] for k in state["keys"] if k in nt}))
        if "uid" in nt and "token_level_scores" in batch.batch.keys():
            scores = batch.batch["token_level_scores"].sum(-1).float().cpu().numpy()
            metrics["grpo/identical_reward_groups"] = identical_group_share(scores, nt["uid"])
        fail_fast.update(metrics)
        if hacking is not None:
            hacking.update(metrics)
        return metrics

    sampler = main_ppo_v0.create_rl_sampler

    def create_rl_sampler(data_config, dataset):
        if pair_groups:
            return PairSampler(dataset, seed=data_config.get("seed") or 0)
        return sampler(data_config, dataset)

    fit = ray_trainer.RayPPOTrainer.fit

    def fit_after_judge(self, *args, **kwargs):
        wait_for_judge(opts)
        return fit(self, *args, **kwargs)

    ray_trainer.RayPPOTrainer.fit = fit_after_judge
    ray_trainer.extract_reward = extract_reward
    ray_trainer.compute_advantage = grouped_advantage
    ray_trainer.compute_data_metrics = compute_data_metrics
    main_ppo_v0.create_rl_sampler = create_rl_sampler
