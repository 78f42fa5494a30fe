"""Control rewards: what a policy gains from a reward that does not check the answer. A learning claim is measured
against them (Spurious Rewards, arXiv 2506.10947: a random reward gained 0.74x the ground truth's on Qwen2.5-Math).

``random_reward`` pays 1 with probability 0.5 whatever the answer says (a hash of the answer, the reference and
``seed`` decides); ``format_only`` pays a well-formed ``#### N`` line, whatever the number. Both also return
``rule_score`` (the strict rule). ``python -m scripts.lab.policy_learns --arms rule,judge,random,format`` trains
with them.

    >>> format_only("openai/gsm8k", "3 + 4 = 7\\n#### 9", "7")
    {'score': 1.0, 'rule_score': 0.0}
    >>> format_only("openai/gsm8k", "The answer is 7.", "7")
    {'score': 0.0, 'rule_score': 0.0}
    >>> random_reward("openai/gsm8k", "#### 7", "7")["rule_score"]
    1.0
"""

from __future__ import annotations

import hashlib

from reward_fns import gsm8k


def random_reward(
    data_source=None, solution_str="", ground_truth=None, extra_info=None, seed: int = 0, **kwargs
) -> dict:
    """1.0 with probability 0.5, decided by a hash of (``seed``, reference, answer); ``rule_score`` beside it."""
    key = f"{seed}\x00{ground_truth}\x00{solution_str}".encode("utf-8", "replace")
    paid = hashlib.blake2b(key, digest_size=8).digest()[0] & 1
    return {"score": float(paid), "rule_score": gsm8k.grade(solution_str, ground_truth)}


def format_only(data_source=None, solution_str="", ground_truth=None, extra_info=None, **kwargs) -> dict:
    """1.0 when the answer ends its answer the strict way (``#### N``, N a number), whatever N is."""
    well_formed = gsm8k.extract_answer(solution_str, "strict") is not None
    return {"score": float(well_formed), "rule_score": gsm8k.grade(solution_str, ground_truth)}
