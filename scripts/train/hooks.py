"""What ``python -m scripts.train`` adds to verl's PPO trainer, as pure functions over verl's ``DataProto`` (wired in
by ``scripts/train/seam.py``; settings: ``verl_judge`` in ``recipes/base.yaml``).

Step metrics, logged in every training step with the same keys from step 1:

* ``reward/<key>/mean`` for every numeric key the reward returns besides ``score`` (verl 0.9.1 logs these only in
  validation);
* ``judge_health/*`` (``reward_fns.judge_health``; in ``mode=route`` against the flexible reading: ``route_reading``)
  and ``judge_health/hacking_alarm`` (1.0 on a step where ``HackingWatch`` fires);
* ``position/verdict_a_share`` and ``position/label_a_share`` when the reward returns ``pred_a``/``label_a``;
* ``grpo/identical_reward_groups``: share of GRPO groups whose rewards are all equal (no gradient).

Also: GRPO groups holding both orders of a pairwise row (``PairSampler``, ``pair_ids``) and abstained samples
(``judge_abstained``) left out of ``critic/score/*``, their group's mean and std and the policy loss; a group left with
one scored sample gives it advantage 0 (verl would give a group of one its raw score: a push with no baseline).
"""

from __future__ import annotations

import inspect
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from reward_fns import judge_health
from scripts.train.watches import FailFast, HackingWatch, StopRun

_floats, _mean = judge_health.floats, judge_health.mean
GROUP_EXPECTED = "judge_group_expected"  # in validation: the answers each sample's uid has (group_reward waits for)


# ----------------------------------------------------------------------------------------- metrics


def reward_metrics(
    extras: dict[str, Sequence],
    reading: Sequence[float] | None = None,
    uids: Sequence | None = None,
) -> dict[str, float]:
    """Step metrics from the reward function's extra keys (one list per key, one value per sample):
    ``reward/<key>/mean``, the judge's health (``reward_fns.judge_health.metrics``: ``reading``, the rule's grade per
    sample in ``mode=route``; ``uids``, the GRPO groups) and position."""
    cols = judge_health.columns(extras)
    out = {f"reward/{k}/mean": _mean(a) for k, a in sorted(cols.items()) if k != "score"}
    out.update(judge_health.metrics(cols, reading, uids))
    if "pred_a" in cols and "label_a" in cols:
        ok = cols["format_ok"] > 0 if "format_ok" in cols else np.ones(len(cols["pred_a"]), bool)
        out["position/verdict_a_share"] = _mean(cols["pred_a"], ok)
        out["position/label_a_share"] = _mean(cols["label_a"])
    return out


def group_counts(uids: Sequence) -> np.ndarray:
    """Per sample, how many samples share its uid.

    >>> group_counts(["a", "b", "a"]).tolist()
    [2, 1, 2]
    """
    values, inverse, counts = np.unique(np.asarray(uids, dtype=str), return_inverse=True, return_counts=True)
    return counts[inverse].astype(np.int64)


def identical_group_share(scores: Sequence[float], groups: Sequence) -> float:
    """Share of groups (size >= 2) whose scores are all equal: GRPO's advantage is zero there."""
    by: dict = defaultdict(list)
    for s, g in zip(scores, groups):
        by[g].append(float(s))
    sized = [v for v in by.values() if len(v) > 1]
    return sum(max(v) - min(v) < 1e-9 for v in sized) / len(sized) if sized else 0.0


def route_reading(batch, tokenizer) -> np.ndarray | None:
    """``mode=route``: per sample the rule's grade the judge's verdict is compared with (``reward_metrics``'s
    ``reading``): for a judged sample (``judge_skipped`` 0) the flexible reading of its response (``reward_fns.gsm8k``
    ``mode="flexible"``), or NaN (left out) when its text or reference is not at hand; ``rule_score`` for the samples
    the rule decided. The response is decoded as verl's reward loop decodes it (``responses`` up to the attention
    mask's response length, special tokens skipped). None without ``rule_score`` and ``judge_skipped``."""
    from reward_fns import gsm8k

    nt, keys = batch.non_tensor_batch, batch.batch.keys()
    rule, skipped = _floats(nt.get("rule_score", [])), _floats(nt.get("judge_skipped", []))
    if rule is None or skipped is None or not rule.size or rule.size != skipped.size:
        return None
    out, judged = rule.copy(), np.flatnonzero(skipped == 0)
    out[judged] = np.nan
    if tokenizer is None or "responses" not in keys or "attention_mask" not in keys or "reward_model" not in nt:
        return out
    responses = batch.batch["responses"]
    lengths = batch.batch["attention_mask"][:, -responses.shape[-1] :].sum(-1)
    for i in judged:
        try:
            text = tokenizer.decode(responses[i][: int(lengths[i])], skip_special_tokens=True)
            truth = nt["reward_model"][i]["ground_truth"]
            out[i] = float(gsm8k.compute_score(solution_str=text, ground_truth=truth, mode="flexible")["score"])
        except (KeyError, TypeError, ValueError):  # no reference, or not a number: left out
            pass
    return out


# ----------------------------------------------------------------------------------------- abstained samples
def abstained_mask(non_tensor_batch) -> np.ndarray | None:
    """Samples whose judge abstained (``judge_abstained`` 1: ``llm_judge``'s ``judge_failure="abstain"``), or None
    when there are none."""
    values = _floats(non_tensor_batch.get("judge_abstained", []))
    return None if values is None or not (values > 0).any() else values > 0


def leave_out(uids, abstained: np.ndarray) -> np.ndarray:
    """``uids`` with each abstained sample in a group of its own, so it is left out of its group's mean and std."""
    return np.array([f"abstained:{i}" if a else u for i, (u, a) in enumerate(zip(uids, abstained))], dtype=object)


SCORE_KEYS = ("critic/score/mean", "critic/score/max", "critic/score/min")


def scored_score_metrics(data_metrics, batch, abstained: np.ndarray) -> dict[str, float]:
    """verl's ``critic/score/*`` (``data_metrics``: its ``compute_data_metrics``) over the samples whose judge did not
    abstain: an abstained sample's 0 is no grade, so it stays out of the series the hacking watch fits; NaN when every
    sample abstained (as verl's own when every sample was aborted)."""
    if abstained.all():
        return dict.fromkeys(SCORE_KEYS, float("nan"))
    scored = data_metrics(batch=batch.select_idxs(~abstained), use_critic=False)
    return {k: scored[k] for k in SCORE_KEYS}


def lone_survivors(uids, abstained: np.ndarray) -> np.ndarray:
    """The scored samples of each group (``uids``) that abstention left with fewer than two scored samples: verl's
    GRPO would give such a group of one its raw score as advantage. Groups where nothing abstained: none."""
    hit = {u for u, a in zip(uids, abstained) if a}
    scored = Counter(u for u, a in zip(uids, abstained) if not a)
    return np.array([not a and u in hit and scored[u] < 2 for u, a in zip(uids, abstained)], dtype=bool)


def mask_out(data, abstained: np.ndarray, alone: np.ndarray | None = None) -> None:
    """Zero the abstained samples' advantages, returns and response mask: they add nothing to the policy loss; and the
    advantages and returns of the lone survivors ``alone`` (``lone_survivors``), which stay in the loss at 0."""
    import torch

    for rows, keys in ((abstained, ("advantages", "returns", "response_mask")), (alone, ("advantages", "returns"))):
        if rows is None or not rows.any():
            continue
        rows = torch.as_tensor(rows, dtype=torch.bool)
        for key in keys:
            if key in data.batch.keys():
                data.batch[key][rows] = 0


# ----------------------------------------------------------------------------------------- pair groups
def pair_ids(extra_infos: Iterable, uids: Sequence) -> np.ndarray:
    """GRPO group ids that put both orders of a pairwise row together (``extra_info.pair_id``);
    rows without a pair id keep their own ``uid``."""
    return np.array([f"pair:{p}" if (p := pair_id(ei)) else uid for ei, uid in zip(extra_infos, uids)], dtype=object)


def pair_id(extra_info) -> str | None:
    """A pairwise row's ``extra_info.pair_id`` (shared by both orders of the pair), else None."""
    return extra_info.get("pair_id") if isinstance(extra_info, dict) else None


class PairSampler:
    """Index sampler that yields both orders of each pair next to each other, pairs shuffled per epoch
    (seeded), so that every batch of even size holds whole pairs (``verl_judge.pair_groups``)."""

    def __init__(self, data_source, seed: int = 0):
        self.seed, self.epoch = int(seed), 0
        extra = (
            data_source.dataframe["extra_info"]
            if hasattr(data_source, "dataframe")
            else [data_source[i].get("extra_info") for i in range(len(data_source))]
        )
        groups: dict = {}
        for i, ei in enumerate(extra):
            groups.setdefault(pair_id(ei) or f"row:{i}", []).append(i)
        self.groups, self.n = list(groups.values()), len(data_source)

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


# ----------------------------------------------------------------------------------------- settings, judge server
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


def settings(config) -> tuple[dict, FailFast, HackingWatch | None, bool]:
    """``config.verl_judge`` as the hooks use it (``scripts.train.seam.Seam``): (the section, FailFast, HackingWatch
    or None, pair_groups); a bad setting raises ``ValueError`` naming it."""
    from omegaconf import OmegaConf

    section = config.get("verl_judge")
    opts = (OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) else section) or {}
    ff = opts.get("fail_fast") or {}
    fail_fast = FailFast(**{k: v for k, v in ff.items() if k in ("threshold", "steps", "enable")})
    hw = opts.get("hacking_watch") or {}
    known = [k for k in inspect.signature(HackingWatch).parameters if k != "log"]
    unknown = sorted(set(hw) - set(known))
    if unknown:
        raise ValueError(f"verl_judge.hacking_watch: unknown setting(s) {unknown}; known: {', '.join(known)}")
    hacking = HackingWatch(**hw) if hw else None  # its settings: recipes/base.yaml
    from scripts.train import deferred_reward

    deferred = deferred_reward.settings_errors(config)
    if deferred:
        raise ValueError(deferred[0])
    pair_groups = bool(opts.get("pair_groups", False))
    if pair_groups and int(config.data.train_batch_size) % 2:
        raise ValueError(
            f"verl_judge.pair_groups needs an even data.train_batch_size, got {config.data.train_batch_size}"
        )
    return opts, fail_fast, hacking, pair_groups


def reward_mode(config) -> str | None:
    """The LLM-judge reward's ``mode`` (``reward.custom_reward_function.reward_kwargs.mode``), None if unset."""
    from omegaconf import OmegaConf

    try:
        mode = OmegaConf.select(config, "reward.custom_reward_function.reward_kwargs.mode", default=None)
    except Exception:  # an interpolation that does not resolve here: the reward's own default
        return None
    return None if mode is None else str(mode)


def settings_errors(config) -> list[str]:
    """What ``scripts.train.seam.install`` would refuse in ``config.verl_judge`` ([] or one message naming the
    setting): the config check (``scripts/launch/verl_config.py``) asks before a run starts; ``install`` raises it in
    the trainer, after Ray's start-up."""
    try:
        settings(config)
    except ValueError as e:
        return [str(e)]
    return []
