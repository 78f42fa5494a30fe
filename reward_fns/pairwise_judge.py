"""The pairwise judge as a reward (a verl 0.9.1 custom reward, async): ``<better>A|B</better>`` verdicts of the
versioned ``pairwise_ref`` prompt turned into rewards for policy training, in ``mode`` ``pairwise_ref``
(``compute_score``: the candidate against the reference solution in both orders) or ``tournament`` (``score_group``:
each answer of one GRPO group against its group mates, ``scheme`` ``circular`` or ``all_pairs``; the arithmetic in
``reward_fns.win_rates``). A thin policy over ``reward_fns.judge_service``, as ``reward_fns.llm_judge`` is (the same
endpoints, client, guard, canaries and failure rules), read with ``PairwiseSettings`` (``reward_fns.judge_options``).
The rewards, ``rule_first``, grounded verdicts, canaries, failures and the returned keys: README_pairwise_judge.md.
From a shell, against a fake judge (``python -m tests.doubles.fake_openai``):

    python -m reward_fns.pairwise_judge --base-url http://127.0.0.1:18555/v1 --model judge \\
        --question 'What is 6 * 12?' --reference '6 * 12 = 72\\n#### 72' '#### 72' '#### 96'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from reward_fns import canaries, gsm8k, guard, judge_service
from reward_fns.judge_options import Mode, PairwiseSettings, fallback_value
from reward_fns.judge_service import DEFAULT_REMOTE_MODEL, Case, log_failure, probe_index, reference_shown
from reward_fns.parse import normalize_number, normalize_text, reference_answer
from reward_fns.verdicts import PAIRWISE
from reward_fns.win_rates import FAILED, REFUSED, SCHEMES, comparisons, final_of, win_rates

GROUP_STATS = ("flip_rate", "tie_rate", "cycle_rate", "calls")  # a tournament's, on each row as judge_group_<stat>
KEYS = (
    *"score judge_wins judge_flip judge_tie judge_parse_fail judge_error judge_fallback judge_abstained rule_score "
    "judge_calls judge_seconds judge_cycle judge_guarded".split(),
    *canaries.KEYS,
)
DEFAULTS = PairwiseSettings.defaults()  # the knobs' defaults (a view of PairwiseSettings)
#: the label check of a data set's ``reward_model.ground_truth`` (the dry run's: scripts/launch/config_paths.py)
check_label = gsm8k.reference_number


def check_options(**kwargs: Any) -> list[str]:
    """One message per invalid option ([]: none), what ``compute_score`` / ``score_group`` raise at a call; the config
    check (``scripts/launch/config_paths.py``) asks with a run's ``reward_kwargs``, endpoint names included."""
    return PairwiseSettings.problems({k: v for k, v in kwargs.items() if k != "stats"})


# ---------------------------------------------------------------------------- rewards
def decides(rule: float, flexible: float, reaches: bool) -> float | None:
    """What ``rule_first`` may decide for an answer without a call: its rule grade where the flexible reading and
    the guard's reader (``reaches``: its one final answer is the reference's) agree; None: undecided, the judge is
    asked (a right answer the strict rule misses, ``The answer is 18.``; a hedge the rules pay, ``The answer is 96.
    #### 72``)."""
    return rule if rule == flexible == float(reaches) else None


async def _play(texts: list[str], scheme: str, rules: list | None, finals: list, ref: Decimal | None, ask):
    """Ask the judge every comparison the rule does not decide (concurrently; the client bounds how many at once):
    ``(win_rates(...), seconds per answer)``. ``rules``: each answer's ``decides`` (None: no ``rule_first``);
    ``finals``: each answer's final answer; ``ref``: the reference answer shown (two answers reaching it tie)."""
    plan = comparisons(len(texts), scheme)
    rules = rules or [None] * len(texts)
    apart = lambda a, b: None not in (rules[a], rules[b]) and rules[a] != rules[b]  # noqa: E731
    decided = {(a, b): "AB"[rules[a] < rules[b]] for a, b in plan if apart(a, b)}
    asked = [p for p in plan if p not in decided]
    replies = await asyncio.gather(*(ask(texts[a], texts[b]) for a, b in asked))
    seconds = [0.0] * len(texts)
    for (a, _), r in zip(asked, replies):
        seconds[a] += r[1]
    verdicts = {p: r[0] for p, r in zip(asked, replies)}
    tied = lambda a, b: ref is not None and finals[a] == ref == finals[b]  # noqa: E731
    ties = [p for p, r in zip(asked, replies) if r[0] in ("A", "B") and tied(*p)]
    voided = [p for p, r in zip(asked, replies) if r[2] and p not in ties]
    return win_rates(texts, verdicts, scheme, decided, voided, ties, finals), seconds


def _row(t: dict | None, i: int, rule_score: float, fallback_score: float, abstain: bool, calls: float, secs: float):
    out = dict.fromkeys(KEYS, 0.0)
    out.update(score=fallback_score, judge_wins=-1.0, judge_fallback=1.0, rule_score=rule_score)
    if t is None:  # no endpoint
        return out
    out.update(judge_flip=t["flip"][i], judge_tie=t["tie"][i], judge_parse_fail=t["parse_fail"][i])
    out.update(judge_guarded=t["guarded"][i], judge_error=t["error"][i], judge_calls=float(calls), judge_seconds=secs)
    if t["failed"][i] and abstain:  # no reward: left out of its group
        out.update(score=0.0, judge_fallback=0.0, judge_abstained=1.0)
    elif t["win_rate"][i] is not None:
        out.update(score=t["win_rate"][i], judge_wins=t["win_rate"][i], judge_fallback=0.0)
    elif not calls and not t["failed"][i]:  # no mate to compare with (a group of one): the rule's grade, no failure
        out.update(score=rule_score, judge_fallback=0.0)
    return out


async def score_group(
    texts: Sequence[object],
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    stats: dict | None = None,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    **kwargs: Any,
) -> list[dict]:
    """The reward dicts (``KEYS``) of one group's answers to one question, in order (README_pairwise_judge.md);
    ``kwargs``: ``PairwiseSettings`` (``mode`` default ``tournament``); the router arguments are verl's. ``stats`` (a
    dict), in a tournament: filled with the group's ``flip_rate``, ``tie_rate``, ``cycle_rate``, ``triples_decided``,
    ``cycles`` and ``calls``."""
    s = PairwiseSettings.of({"mode": Mode.TOURNAMENT, **kwargs})
    case = Case.of(texts, ground_truth, extra_info)
    texts, abstain = case.answers, s.judge_failure == "abstain"
    rules = [gsm8k.grade(t, ground_truth, s.rule_mode) for t in texts]
    fallbacks = [fallback_value(s.fallback, r) for r in rules]
    client = s.client(reward_router_address, reward_model_tokenizer)
    if client is None:
        return [_row(None, i, rules[i], fallbacks[i], abstain, 0, 0.0) for i in range(len(texts))]
    shows = reference_shown(PAIRWISE, case, prompt=s.prompt, prompt_version=s.prompt_version)  # what a tie must reach
    ref = normalize_number(normalize_text(shows)) if shows is not None else None
    finals = [final_of(t) for t in texts]

    def first(i: int) -> float | None:
        """``rule_first``'s grade (``decides``) of answer ``i``."""
        grade = lambda m: gsm8k.grade(texts[i], ground_truth, m)  # noqa: E731
        return decides(grade(s.rule_mode), grade("flexible"), ref is not None and finals[i] == ref)

    async def ask(a: str, b: str) -> tuple:
        """One comparison, ``a`` as A: ``(verdict, seconds, voided, cached, agree)``. The verdict: ``"A"``/``"B"``,
        None (no verdict in the reply), ``FAILED`` (a ``fallback`` failure) or ``REFUSED`` (another 4xx); voided: by
        the guard; agree: the reply's quotes name both answers as the shown reference's (the tie canaries' verdict)."""
        answer = await judge_service.ask(client, PAIRWISE, case, (a, b), **s.prompt_options)
        verdict = {None: answer.value, "fallback": FAILED}.get(answer.failure, REFUSED)
        if answer.failure:
            log_failure(answer, client.url, answer.failure)
        agree = answer.value in ("A", "B") and all(
            guard.pair_guard(answer.text, a, b, shows, choice=side) is None for side in "AB"
        )
        return verdict, answer.seconds, answer.problem is not None, answer.cached, agree

    async def tournament_rows() -> list[dict]:
        decided = [first(i) for i in range(len(texts))] if s.rule_first else None
        t, seconds = await _play(texts, s.scheme, decided, finals, ref, ask)
        keys = ("flip_rate", "tie_rate", "cycle_rate", "triples_decided", "cycles")
        (stats if stats is not None else {}).update({k: t[k] for k in keys}, calls=sum(t["calls"]))
        rows = [_row(t, i, rules[i], fallbacks[i], abstain, t["calls"][i], seconds[i]) for i in range(len(texts))]
        return [{**r, "judge_cycle": t["cycle_rate"]} for r in rows]

    async def versus_reference(i: int) -> dict:
        """Answer ``i`` against the reference solution (right by construction, whatever its text states)."""
        started = time.perf_counter()
        decided = [first(i), 1.0] if s.rule_first else None
        t, _ = await _play([texts[i], case.reference], "all_pairs", decided, [finals[i], ref], ref, ask)
        calls = sum(t["calls"])
        return _row(t, 0, rules[i], fallbacks[i], abstain, calls, time.perf_counter() - started if calls else 0.0)

    async def reference_rows() -> list[dict]:
        return list(await asyncio.gather(*(versus_reference(i) for i in range(len(texts)))))

    drawn = {i: k for i, k in enumerate(probe_index(t, ground_truth, s.canary_every) for t in texts) if k is not None}
    rows, probed = await asyncio.gather(
        tournament_rows() if s.mode == Mode.TOURNAMENT else reference_rows(),
        asyncio.gather(*(canaries.pair_probe(ask, k, case.reference_answer) for k in drawn.values())),
    )
    for i, counts in zip(drawn, probed):
        rows[i].update(counts)
    return rows


async def compute_score(
    data_source=None, solution_str="", ground_truth=None, extra_info=None, solution_strs=None, **kwargs
):
    """verl custom reward. One sample: ``mode="pairwise_ref"``, the candidate against the reference in both orders.
    Called with ``solution_strs`` (the group reward contract, ``scripts/train/group_reward.py``, verl's batch
    spelling): every answer of one GRPO group, a tournament unless ``mode`` says otherwise; a tournament's rows also
    carry the group's ``judge_group_<stat>`` (``GROUP_STATS``), by which ``reward_fns.judge_health`` knows win rates
    against group mates. The options are ``score_group``'s."""
    group = [kwargs.pop(k, None) for k in ("ground_truths", "extra_infos", "data_sources")]
    if solution_strs is not None:  # one prompt: the first answer's ground truth and extra info
        mode, stats = kwargs.pop("mode", Mode.TOURNAMENT), {}
        rows = await score_group(solution_strs, group[0][0], group[1][0], mode=mode, stats=stats, **kwargs)
        tally = {f"judge_group_{k}": float(stats.get(k, 0)) for k in GROUP_STATS} if mode == Mode.TOURNAMENT else {}
        return [{**row, **tally} for row in rows]
    kwargs["mode"] = mode = kwargs.get("mode", PairwiseSettings.mode)
    if mode != Mode.PAIRWISE_REF:
        raise ValueError(
            f"compute_score scores one sample: mode must be {Mode.PAIRWISE_REF!r} ({Mode.TOURNAMENT}: the whole "
            f"group, solution_strs), got {mode!r}"
        )
    return (await score_group([solution_str], ground_truth, extra_info, **kwargs))[0]


#: the options under which ``compute_score`` scores only a whole group (the config check asks)
compute_score.group_only = lambda mode=PairwiseSettings.mode, **_: mode == Mode.TOURNAMENT


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reward_fns.pairwise_judge", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("answers", nargs="+", help="the answers of one group (pairwise_ref: each against the reference)")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default=DEFAULT_REMOTE_MODEL)
    p.add_argument("--api-key-env", default=PairwiseSettings.api_key_env)
    p.add_argument("--question", default="")
    p.add_argument("--reference", required=True, help="the reference solution (\\n: a new line)")
    p.add_argument("--mode", choices=Mode.PAIRWISE, default=PairwiseSettings.mode)
    p.add_argument("--scheme", choices=SCHEMES, default=PairwiseSettings.scheme)
    p.add_argument("--rule-first", action="store_true")
    args = p.parse_args(argv)
    reference = args.reference.replace("\\n", "\n")
    opts = {k: getattr(args, k) for k in ("mode", "base_url", "model", "api_key_env", "scheme", "rule_first")}
    answers, info = [a.replace("\\n", "\n") for a in args.answers], {"question": args.question, "answer": reference}
    rows = asyncio.run(score_group(answers, reference_answer(reference), info, **opts))
    for answer, row in zip(args.answers, rows):
        print(json.dumps({"answer": answer, **row}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
