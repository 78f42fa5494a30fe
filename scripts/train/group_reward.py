"""A verl 0.9.1 reward manager that scores the answers of one GRPO group (``uid``) together:
``reward_fns.pairwise_judge.score_group`` (``mode="tournament"``: each answer against its group mates; or
``"pairwise_ref"``: each against the reference, per sample) under the name ``pairwise_group``.

verl's reward loop hands a manager one sample at a time (``RewardLoopWorker.compute_score`` ->
``RewardManagerBase.run_single``; streamed from the agent loop, or in chunks from ``RewardLoopManager.compute_rm_score``
with a colocated judge), so the manager gathers a group: each sample waits until its group holds ``size`` answers
(``actor_rollout_ref.rollout.n``, or ``verl_judge.group_reward.size``, which the config check holds to it; in
validation the sample's ``judge_group_expected``, which ``scripts/train/hooks.py`` sets to its uid's count in the
repeated batch: a validation pass samples each prompt ``val_kwargs.n`` times), then one call of ``score_group`` scores
them all and every sample takes its own row. A group still short after ``timeout`` seconds
(``verl_judge.group_reward.timeout``, default 120: a failed rollout never arrives) is scored as it stands, with a
warning naming the group, what it held and the setting; ``judge_group_size`` says how many it held (a group of one has
no mate: the ``judge_failure`` fallback). A sample without a ``uid``, or a late answer of a group scored short, has no
mate to wait for: it is scored at once as a group of one, with a warning. Every wait is bounded: a sample waits
``timeout`` for its mates, then the judge's calls, each bounded by the client's ``deadline``
(``reward_kwargs.deadline``). The samples of a group must reach one worker: ``reward.num_workers=1`` (the agent loop
picks a worker per sample at random; the colocated path splits the batch into chunks).

The options of ``score_group`` are the custom reward's ``reward.custom_reward_function.reward_kwargs`` (set ``path``
to ``reward_fns/pairwise_judge.py``: with a reward model enabled, verl runs a manager only when a custom function is
named). Each sample's ``reward_extra_info``: ``pairwise_judge.KEYS`` then ``GROUP_KEYS`` (the group's size, flip,
tie and cycle rates and judge calls, the same on each of its samples). In a run (a worker loads the file itself):

    reward.reward_manager.source=importlib reward.reward_manager.name=GroupRewardManager \\
    reward.reward_manager.module.path=scripts/train/group_reward.py reward.num_workers=1 \\
    reward.custom_reward_function.path=reward_fns/pairwise_judge.py \\
    +reward.custom_reward_function.reward_kwargs.mode=tournament
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

from reward_fns import pairwise_judge
from reward_fns.judge_errors import throttled
from scripts.train.hooks import GROUP_EXPECTED

logger = logging.getLogger(__name__)

__all__ = ["GroupRewardManager", "GROUP_KEYS", "NAME"]

NAME = "pairwise_group"
GROUP_KEYS = (
    "judge_group_size",
    "judge_group_flip_rate",
    "judge_group_tie_rate",
    "judge_group_cycle_rate",
    "judge_group_calls",
)
DEFAULT_TIMEOUT = 120.0
#: groups scored short remembered at most (their answers still missing; a lost rollout's never comes)
LATE_MEMORY = 65536


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


class _Group:
    """The answers of one ``uid`` gathered so far, and the one scoring task once it closes."""

    def __init__(self, ground_truth: Any, extra_info: Any, size: int):
        self.texts: list[str] = []
        self.size = size
        self.ground_truth, self.extra_info = ground_truth, extra_info
        self.closed = asyncio.Event()
        self.task: asyncio.Task | None = None


class GroupRewardManager(RewardManagerBase):
    """See the module docstring."""

    def __init__(self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        opts = _plain(OmegaConf.select(config, "verl_judge.group_reward", default=None)) or {}
        size = opts.get("size")
        self.size = int(OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1) if size is None else size)
        self.timeout = float(opts.get("timeout", DEFAULT_TIMEOUT))
        if self.size < 1 or self.timeout <= 0:
            raise ValueError(f"verl_judge.group_reward: size must be >= 1 and timeout > 0, got {opts}")
        kwargs = _plain(OmegaConf.select(config, "reward.custom_reward_function.reward_kwargs", default=None)) or {}
        self.kwargs = dict(kwargs)
        if reward_router_address is not None:
            self.kwargs.update(
                reward_router_address=reward_router_address, reward_model_tokenizer=reward_model_tokenizer
            )
        problems = pairwise_judge.check_options(**kwargs)
        if problems:
            raise ValueError("; ".join(problems))
        self.groups: dict[str, _Group] = {}
        self.late: OrderedDict[str, int] = OrderedDict()  # uid of a group scored short -> its answers still missing
        self.short = 0  # groups scored short after the timeout, so far
        self.alone = 0  # samples scored alone at once (no uid, or a late answer of a group scored short), so far

    def _text(self, item) -> str:
        response_ids = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        return self.tokenizer.decode(response_ids[:valid], skip_special_tokens=True)

    async def _score(self, group: _Group) -> tuple[list[dict], dict]:
        stats: dict = {}
        kwargs = {"mode": "tournament", **self.kwargs}
        rows = await pairwise_judge.score_group(
            group.texts, group.ground_truth, group.extra_info, stats=stats, **kwargs
        )
        values = (len(group.texts),) + tuple(stats.get(k, 0) for k in ("flip_rate", "tie_rate", "cycle_rate", "calls"))
        return rows, dict(zip(GROUP_KEYS, map(float, values)))

    def _close(self, uid: str, group: _Group) -> None:
        """Score ``group`` as it stands (once); after it, a sample of this ``uid`` starts a new group (a late answer
        of a group scored short: a group of one, ``run_single``)."""
        if group.task is None:
            if self.groups.get(uid) is group:
                del self.groups[uid]
            group.task = asyncio.ensure_future(self._score(group))
            group.closed.set()

    def _warn_short(self, uid: str, group: _Group) -> None:
        self.short += 1
        if throttled(self.short):
            logger.warning(
                "group_reward: group %s scored with %d of %d answers after waiting %.0fs for the rest "
                "(verl_judge.group_reward.timeout; short groups so far: %d)",
                uid,
                len(group.texts),
                group.size,
                self.timeout,
                self.short,
            )

    def _warn_alone(self, uid: str | None) -> None:
        self.alone += 1
        if throttled(self.alone):
            why = "without a uid" if uid is None else f"of group {uid} came after the group was scored short"
            logger.warning(
                "group_reward: a sample %s: scored alone, at once (samples scored alone so far: %d)", why, self.alone
            )

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1:][0]  # a multi-turn sample: its last sequence, as verl's naive manager does
        nt = item.non_tensor_batch
        uid = str(nt["uid"]) if "uid" in nt else None
        extra_info = nt.get("extra_info")
        group = self.groups.get(uid) if uid is not None else None
        if group is None:
            reward_model = nt.get("reward_model")
            gt = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
            alone = uid is None or uid in self.late  # no mate will come: a group of one, scored at once
            if alone:
                self._warn_alone(uid)
                if uid is not None:
                    self.late[uid] -= 1
                    if not self.late[uid]:
                        del self.late[uid]
            size = 1 if alone else int(nt[GROUP_EXPECTED]) if GROUP_EXPECTED in nt else self.size
            group = _Group(gt, dict(extra_info) if isinstance(extra_info, Mapping) else None, size)
            if not alone:
                self.groups[uid] = group
        index = len(group.texts)
        group.texts.append(self._text(item))
        if len(group.texts) >= group.size:
            self._close(uid, group)
        else:
            try:
                await asyncio.wait_for(group.closed.wait(), self.timeout)
            except asyncio.TimeoutError:  # scored as it stands; its missing answers, if they come, alone
                if group.task is None:
                    self._warn_short(uid, group)
                    self.late[uid] = group.size - len(group.texts)
                    if len(self.late) > LATE_MEMORY:
                        self.late.popitem(last=False)
                self._close(uid, group)
        rows, shared = await asyncio.shield(group.task)
        row = {**rows[index], **shared}
        return {"reward_score": row["score"], "reward_extra_info": row}


if NAME not in REWARD_MANAGER:  # the file loaded twice (imported, then by path: importlib source) registers once
    register(NAME)(GroupRewardManager)
