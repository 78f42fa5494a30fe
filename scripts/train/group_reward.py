"""A verl 0.9.1 reward manager for group rewards (registered ``pairwise_group``): it gathers the answers of one GRPO
group (``uid``) and calls the configured reward function once with all of them. The contract (a function naming
``solution_strs`` returning one dict per answer, same keys, ``score`` first; ``group_only``) and an example:
recipes/README.md, "Group rewards".

Why it waits: verl's reward loop hands a manager one sample at a time (``RewardLoopWorker.compute_score`` ->
``RewardManagerBase.run_single``), so each sample waits until its group holds ``size`` answers (``rollout.n``; in
validation the sample's ``judge_group_expected``, set by ``scripts/train/hooks.py``), then one call scores them all
and each takes its own row plus ``judge_group_size``. A group still short after ``verl_judge.group_reward.timeout``
is scored as it stands, with a warning; a sample without a ``uid``, or late for a group scored short, is scored at
once as a group of one. The samples of a group must reach one worker: ``reward.num_workers=1``. In a run (a worker
loads the file itself):

    reward.reward_manager.source=importlib reward.reward_manager.name=GroupRewardManager \\
    reward.reward_manager.module.path=pkg://scripts.train.group_reward reward.num_workers=1 \\
    reward.custom_reward_function.path=pkg://my_rewards reward.custom_reward_function.name=my_group_reward
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

from reward_fns.judge_errors import throttled
from scripts.train.hooks import GROUP_EXPECTED

logger = logging.getLogger(__name__)


NAME = "pairwise_group"
#: what a group reward receives, one list entry per answer (verl's batch reward spelling)
FIELDS = ("data_sources", "solution_strs", "ground_truths", "extra_infos")
SIZE_KEY = "judge_group_size"  # added to each row: how many answers its group held
DEFAULT_TIMEOUT = 120.0
#: groups scored short remembered at most (their answers still missing; a lost rollout's never comes)
LATE_MEMORY = 65536


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def checked(rows: Any, n: int, fn: str) -> list[dict]:
    """``rows``, a group reward's result for ``n`` answers, if it keeps the contract; else ``ValueError`` naming
    ``fn``: one dict per answer, the same keys for every answer, ``score`` first and a number (not NaN, not a bool)."""
    if not isinstance(rows, (list, tuple)) or len(rows) != n:
        got = f"{len(rows)} rows" if isinstance(rows, (list, tuple)) else type(rows).__name__
        raise ValueError(f"group reward {fn}: returned {got} for a group of {n} answers; it must return one dict each")
    for i, row in enumerate(rows):
        keys = list(row) if isinstance(row, Mapping) else None
        if not keys or keys[0] != "score":
            raise ValueError(f"group reward {fn}: answer {i}'s reward must be a dict with 'score' first, got {row!r}")
        score = row["score"]
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
            raise ValueError(f"group reward {fn}: answer {i}'s score must be a number, got {score!r}")
        if set(keys) != set(rows[0]):
            raise ValueError(
                f"group reward {fn}: answer {i}'s keys {keys} differ from answer 0's {list(rows[0])}; every answer "
                "must get the same keys"
            )
    return [dict(row) for row in rows]


class _Group:
    """The answers of one ``uid`` gathered so far (verl's batch spelling), and the one scoring task once it closes."""

    def __init__(self, size: int):
        self.size = size
        self.answers: dict[str, list] = {k: [] for k in FIELDS}
        self.closed = asyncio.Event()
        self.task: asyncio.Task | None = None

    def __len__(self) -> int:
        return len(self.answers["solution_strs"])


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
        fn = _plain(OmegaConf.select(config, "reward.custom_reward_function", default=None)) or {}
        self.fn_name = f"{fn.get('name')} of {fn.get('path')}"
        if compute_score is None or not fn.get("path"):  # verl's default reward scores one sample
            raise ValueError("the group reward manager calls reward.custom_reward_function (a group reward): no path")
        self.is_async = inspect.iscoroutinefunction(compute_score)
        router = {"reward_router_address": reward_router_address, "reward_model_tokenizer": reward_model_tokenizer}
        self.router = {} if reward_router_address is None else router  # as verl's naive manager passes them
        self.groups: dict[str, _Group] = {}
        self.late: OrderedDict[str, int] = OrderedDict()  # uid of a group scored short -> its answers still missing
        self.short = 0  # groups scored short after the timeout, so far
        self.alone = 0  # samples scored alone at once (no uid, or a late answer of a group scored short), so far

    def _text(self, item) -> str:
        response_ids = item.batch["responses"]
        valid = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        return self.tokenizer.decode(response_ids[:valid], skip_special_tokens=True)

    async def _score(self, group: _Group) -> list[dict]:
        """One call of the group reward over the group as it stands; its rows, checked, with the group's size."""
        answers = {k: list(v) for k, v in group.answers.items()}
        if self.is_async:
            rows = await self.compute_score(**answers, **self.router)
        else:  # off the event loop, as verl's naive manager runs a sync reward
            rows = await asyncio.to_thread(self.compute_score, **answers, **self.router)
        n = len(answers["solution_strs"])
        return [{**row, SIZE_KEY: float(n)} for row in checked(rows, n, self.fn_name)]

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
                f"group_reward: group {uid} scored with {len(group)} of {group.size} answers after waiting "
                f"{self.timeout:.0f}s for the rest (verl_judge.group_reward.timeout; short groups so far: {self.short})"
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
        group = self.groups.get(uid) if uid is not None else None
        if group is None:
            alone = uid is None or uid in self.late  # no mate will come: a group of one, scored at once
            if alone:
                self._warn_alone(uid)
                if uid is not None:
                    self.late[uid] -= 1
                    if not self.late[uid]:
                        del self.late[uid]
            group = _Group(1 if alone else int(nt[GROUP_EXPECTED]) if GROUP_EXPECTED in nt else self.size)
            if not alone:
                self.groups[uid] = group
        reward_model, extra_info = nt.get("reward_model"), nt.get("extra_info")
        truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
        extra_info = dict(extra_info) if isinstance(extra_info, Mapping) else None
        index = len(group)
        for key, value in zip(FIELDS, (nt.get("data_source"), self._text(item), truth, extra_info)):
            group.answers[key].append(value)
        if len(group) >= group.size:
            self._close(uid, group)
        else:
            try:
                await asyncio.wait_for(group.closed.wait(), self.timeout)
            except asyncio.TimeoutError:  # scored as it stands; its missing answers, if they come, alone
                if group.task is None:
                    self._warn_short(uid, group)
                    self.late[uid] = group.size - len(group)
                    if len(self.late) > LATE_MEMORY:
                        self.late.popitem(last=False)
                self._close(uid, group)
        row = (await asyncio.shield(group.task))[index]
        return {"reward_score": row["score"], "reward_extra_info": row}


if NAME not in REWARD_MANAGER:  # the file loaded twice (imported, then by path: importlib source) registers once
    register(NAME)(GroupRewardManager)
