"""The pairwise judge as a reward: ``<better>A|B</better>`` verdicts turned into rewards for policy training (a verl
0.9.1 custom reward, async like ``reward_fns.llm_judge``, over the same client, endpoints and failure rules).

The judge is asked with the versioned ``pairwise_ref`` prompt (``pairwise_ref.v3``: the one the pairwise judge recipe
trains on, filled as ``data_prep.pairwise`` fills it: query, reference solution, its final answer, responses A and B;
the responses defused by ``judge_service.defuse``; both responses may reach the reference: a tie), and its reply read
by ``parse.parse_choice``: each comparison is one ``judge_service.ask`` for the ``PAIRWISE`` kind (messages, call,
parse, guard). Modes:

* ``mode="pairwise_ref"`` (``compute_score``, per sample): the candidate against the reference solution
  (``extra_info["answer"]``) in both orders, candidate as A then as B. Reward = the candidate's share of the orders
  that count for it. A right candidate (its one final answer, ``parse.final_answer``, is the reference's) ties with
  the reference: any verdict pays it in full, whichever letter, so neither a position bias nor a taste for the
  reference's text costs a right answer. A wrong one earns a win only from a verdict that picks it, and the guard
  voids that; a reply without a verdict (parse failure), or a request the judge refused, is a loss in that order.
* ``mode="tournament"`` (``score_group``, one GRPO group at once): each answer against its group mates with the
  reference shown, ``scheme="circular"`` (each answer against the next, both orders: 2N comparisons for N >= 3, 2 for
  N = 2) or ``"all_pairs"`` (both orders of every pair, N(N-1)). Reward = the answer's win rate over the comparisons
  that count for it: two right answers tie (a win for both), a verdict for one answer is a loss for the other, a
  verdict the guard voided is a loss for the answer picked and no loss for the other, a comparison without a
  verdict is a loss for both, and one that failed in transport counts for neither. With the reference shown, a
  tournament pays what ``pairwise_ref`` pays (right answers 1, a wrong answer a win only where the guard let a
  verdict for it stand, which it does not); what it adds over the rule is the judge's reading of final answers the
  strict rule misses, at 2 calls a sample. The arithmetic alone (pure): ``reward_fns.win_rates``.

``rule_first=True``: a comparison between an answer the rule (``rule_mode``, default strict ``#### N``) marks right
and one it marks wrong is decided for the right one without a call (in ``pairwise_ref`` the reference is the other,
right by construction), where the flexible reading and the guard's reader agree with the rule (``decides``): a right
answer the strict rule misses, or a hedge the rules pay, is judged.

**Grounded verdicts** (``grounded=True``, default, as in ``llm_judge``; the kind's ``Verdict.grounding``:
``reward_fns.guard.pair_guard``): where the prompt shows the reference answer (both modes here), a verdict counts
only when its reply quotes the winner's answer (``A: 72.``, read as ``Candidate:`` is: ``(72)``, ``72,``, ``**72**``
are 72; words or ``none`` are not), that quote is the reference's and it is the winner's one final answer
(``parse.final_answer``: a winner that hedges or states several answers cannot be verified). The loser's quote and
answer are not checked, so a right answer wins against one that states no final answer (``B: none``). Without a
reference both answers must be quoted (``A: 72. B: 96.``), each that response's one final answer. Else the verdict is
voided: a loss for the answer it picked (a tie, two right answers, stays a tie).

**Canaries** (``canary_every``, default 20, as in ``llm_judge``: the same hash draw per sample): a drawn sample also
sends probes (``canaries.pair``: the reference + 1 against the reference, written alike; ``canaries.tie``: two right
answers written differently) in both orders, graded and guarded as the sample's own comparisons; each answered order
of the first counts one wrong and one right probe (the wrong one accepted when a verdict that stands names it, the
right one rejected when none names it), each of the second one right probe (rejected unless the reply quotes both
as the reference's answer: a tie pays both by their text, so the probe checks that the judge reads them alike). A
probe answered from the cache (already counted) or failed counts nothing; probes are not in ``judge_calls`` /
``judge_seconds``.

Endpoints, as in ``llm_judge``: ``base_url`` (+ ``model``, ``api_key_env``), else verl's ``reward_router_address``
(+ ``reward_model_tokenizer``); neither: no call, ``score`` is the fallback. Transport failures (timeout, 429/5xx after
retries, a broken reply: ``judge_errors.outcome == "fallback"``) follow ``judge_failure``: ``"fallback"`` (``score`` =
``fallback``: ``"rule"``, the rule's grade, or a number; ``judge_fallback=1``) or ``"abstain"`` (``score=0``,
``judge_abstained=1``: ``scripts/train/hooks.py`` leaves the sample out of its group and the loss), for an answer
whose every comparison failed; one failed comparison among others is left out of the win rate. Configuration errors
(401/404 ...) raise ``JudgeConfigError``.

Keys, the same for every sample, in this order: ``score``; ``judge_wins`` (the win share the verdicts give, -1 when
the score is no win share); ``judge_flip`` (share of the answer's pairs whose final answers differ, both orders
parsed, whose verdicts name the same letter: position bias); ``judge_tie`` (share of those pairs it won exactly one
order of: a split; two right answers tying is none); ``judge_parse_fail`` (share of its comparisons without a verdict);
``judge_error`` (1: a comparison failed or was refused); ``judge_fallback``; ``judge_abstained``; ``rule_score``;
``judge_calls`` (requests: both orders in ``pairwise_ref``, those with this answer as A in a tournament, so a group's
sum is its calls); ``judge_seconds`` (wall time of those requests); ``judge_cycle`` (the group's cycle rate, the
same on each of its answers; 0 in ``pairwise_ref``); ``judge_guarded`` (share of its judged comparisons whose verdict
the guard voided); ``canary_wrong``, ``canary_wrong_accepted``, ``canary_right``, ``canary_right_rejected`` (probe
orders, the pointwise judge's keys: ``scripts/train/hooks.py`` reports ``judge_health/canary_accept`` / ``_reject``).
The flip counts the judge's letters, voided or not (position bias); wins, ties and cycles count verdicts that stand.

Against a fake judge that always answers A quoting 72 for both (``#### 72`` ties with the reference: 1.0; the reply
that names ``#### 96`` as A quotes it as 72, so the guard voids it: 0, ``judge_guarded`` 0.5, ``judge_flip`` 1.0):

    echo '{}' > /tmp/none.json && python -m scripts.serve.fake_openai --port 18555 --replies /tmp/none.json \\
        --default '<think>Reference: 72. A: 72. B: 72.</think><better>A</better>' &
    python -m reward_fns.pairwise_judge --base-url http://127.0.0.1:18555/v1 --model judge \\
        --question 'What is 6 * 12?' --reference '6 * 12 = 72\\n#### 72' '#### 72' '#### 96'
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from reward_fns import canaries, gsm8k, guard, judge_service, llm_judge
from reward_fns.judge_errors import throttled
from reward_fns.judge_options import DEFAULTS as JUDGE_DEFAULTS
from reward_fns.judge_options import JUDGE_FAILURES, canary_every_value, fallback_value
from reward_fns.parse import normalize_number, normalize_text, reference_answer
from reward_fns.prompts import load
from reward_fns.redact import mask_url
from reward_fns.verdicts import PAIRWISE
from reward_fns.win_rates import FAILED, REFUSED, SCHEMES, comparisons, final_of, win_rates

logger = logging.getLogger(__name__)

__all__ = ["compute_score", "score_group", "build_messages", "check_options", "decides", "KEYS"]

MODES = ("pairwise_ref", "tournament")
CANARY_KEYS = ("canary_wrong", "canary_wrong_accepted", "canary_right", "canary_right_rejected")  # llm_judge's
KEYS = (
    *"score judge_wins judge_flip judge_tie judge_parse_fail judge_error judge_fallback judge_abstained rule_score "
    "judge_calls judge_seconds judge_cycle judge_guarded".split(),
    *CANARY_KEYS,
)
_CLIENT_KEYS = ("deadline", "max_concurrency", "temperature", "max_tokens", "cache_size", "cache_ttl")
DEFAULTS: dict[str, Any] = {
    **{k: JUDGE_DEFAULTS[k] for k in _CLIENT_KEYS + ("max_response_bytes", "extra_body")},
    **{k: JUDGE_DEFAULTS[k] for k in ("rule_mode", "max_response_chars", "judge_failure", "grounded", "canary_every")},
    "prompt": "pairwise_ref",
    "prompt_version": "v3",
    "scheme": "circular",
    "rule_first": False,
}
_FIELDS = {"query", "reference", "reference_answer", "response_a", "response_b"}


# ---------------------------------------------------------------------------- prompt, options, endpoint
def build_messages(
    response_a: object,
    response_b: object,
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    prompt: str = DEFAULTS["prompt"],
    prompt_version: str = DEFAULTS["prompt_version"],
    max_response_chars: int = DEFAULTS["max_response_chars"],
) -> list[dict]:
    """The judge's messages for one comparison (``judge_service.messages`` for the pairwise kind: both responses
    defused alike, so neither position is marked)."""
    return judge_service.messages(
        PAIRWISE,
        (response_a, response_b),
        ground_truth,
        extra_info,
        prompt=prompt,
        prompt_version=prompt_version,
        max_response_chars=max_response_chars,
    )


def check_options(mode: object = "pairwise_ref", fallback: object = "rule", **options: Any) -> list[str]:
    """One message per invalid option ([]: none), what ``compute_score`` / ``score_group`` raise at a call; the config
    check (``scripts/launch/config_paths.py``) asks with a run's ``reward_kwargs``, endpoint names included."""
    options = {k: v for k, v in options.items() if k not in inspect.signature(score_group).parameters}
    unknown = options.keys() - DEFAULTS.keys()
    if unknown:
        return [f"pairwise_judge: unknown option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}"]
    opt, found = {**DEFAULTS, **options}, []
    for name, value, allowed in (
        ("mode", mode, MODES),
        ("scheme", opt["scheme"], SCHEMES),
        ("judge_failure", opt["judge_failure"], JUDGE_FAILURES),
        ("rule_mode", opt["rule_mode"], gsm8k.MODES),
    ):
        if value not in allowed:
            found.append(f"{name} must be one of {allowed}, got {value!r}")
    try:
        fallback_value(fallback, 0.0)
        canary_every_value(opt["canary_every"])
        fields = load(opt["prompt"], opt["prompt_version"]).fields()
        if not set(PAIRWISE.responses) <= fields <= _FIELDS:
            found.append(f"prompt {opt['prompt']}.{opt['prompt_version']} is no pairwise prompt (fields {fields})")
    except (ValueError, FileNotFoundError) as e:
        found.append(str(e))
    return found


_failures = 0


def _prompt(opt: Mapping) -> dict:
    return {k: opt[k] for k in ("prompt", "prompt_version")}


def _verdict(answer: judge_service.Answer, url: str) -> str | None:
    """A comparison's outcome for ``tournament``: ``"A"``/``"B"``, None (no verdict in the reply), ``FAILED`` (the
    answer cannot cause it: ``fallback``) or ``REFUSED`` (another 4xx); logs a failure."""
    global _failures
    if answer.failure is None:
        return answer.value
    _failures += 1
    if throttled(_failures):
        logger.warning("pairwise_judge: call to %s failed (#%d): %s", mask_url(url), _failures, answer.failure)
    return FAILED if answer.failure == "fallback" else REFUSED


async def _canary(ask, k: int, reference: str | None) -> dict:
    """Pairwise canary probe ``k``, each pair in both orders: ``canaries.pair`` (a wrong answer against a right one:
    each order one wrong and one right probe; the wrong one accepted when a verdict that stands names it, the right
    one rejected when none names it) and ``canaries.tie`` (two right answers written differently: each order one
    right probe, rejected unless the reply quotes both as the reference's answer). An order that failed, or was
    answered from the cache (already counted), counts for nothing."""
    made = canaries.pair(reference, k) if reference is not None else None
    if made is None:
        return {}
    (wrong, right), same = made, canaries.tie(reference, k)
    out = dict.fromkeys(CANARY_KEYS, 0.0)
    orders = ((wrong, right), (right, wrong), same, same[::-1])
    replies = await asyncio.gather(*(ask(a, b) for a, b in orders))
    for n, ((a, _), (verdict, _s, voided, cached, agree)) in enumerate(zip(orders, replies)):
        if verdict in (FAILED, REFUSED) or cached:
            continue
        out["canary_right"] += 1
        if n >= 2:  # two right answers: the judge must quote both as the reference's
            out["canary_right_rejected"] += not agree
            continue
        picked = None if voided or verdict is None else verdict  # the letter paid
        wrong_letter = "A" if a == wrong else "B"
        out["canary_wrong"] += 1
        out["canary_wrong_accepted"] += picked == wrong_letter
        out["canary_right_rejected"] += picked != "AB"[wrong_letter == "A"]
    return out if out["canary_right"] else {}


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


def _row(t: dict | None, i: int, rule_score: float, fallback_score: float, opt: dict, calls: float, secs: float):
    out = dict.fromkeys(KEYS, 0.0)
    out.update(score=fallback_score, judge_wins=-1.0, judge_fallback=1.0, rule_score=rule_score)
    if t is None:  # no endpoint
        return out
    out.update(judge_flip=t["flip"][i], judge_tie=t["tie"][i], judge_parse_fail=t["parse_fail"][i])
    out.update(judge_guarded=t["guarded"][i])
    out.update(judge_error=t["error"][i], judge_calls=float(calls), judge_seconds=secs)
    if t["failed"][i] and opt["judge_failure"] == "abstain":  # no reward: left out of its group
        out.update(score=0.0, judge_fallback=0.0, judge_abstained=1.0)
    elif t["win_rate"][i] is not None:
        out.update(score=t["win_rate"][i], judge_wins=t["win_rate"][i], judge_fallback=0.0)
    return out


async def score_group(
    texts: Sequence[object],
    ground_truth: object = None,
    extra_info: Mapping | None = None,
    *,
    mode: str = "tournament",
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    fallback: object = "rule",
    timeout: float = 60.0,
    max_retries: int = 4,
    reward_router_address: str | None = None,
    reward_model_tokenizer: Any = None,
    stats: dict | None = None,
    **kwargs: Any,
) -> list[dict]:
    """The reward dicts (``KEYS``) of one group's answers to one question, in order (see the module docstring).
    ``stats`` (a dict), in a tournament: filled with the group's ``flip_rate``, ``tie_rate``, ``cycle_rate``,
    ``triples_decided``, ``cycles`` and ``calls``."""
    problems = check_options(mode, fallback, **kwargs)
    if problems:
        raise ValueError("; ".join(problems))
    opt = {**DEFAULTS, **kwargs}
    texts = [judge_service.text_of(t) for t in texts]
    rules = [gsm8k.grade(t, ground_truth, opt["rule_mode"]) for t in texts]
    fallbacks = [fallback_value(fallback, r) for r in rules]
    where = llm_judge.endpoint(base_url, model, api_key_env, reward_router_address, reward_model_tokenizer)
    if where is None:
        return [_row(None, i, rules[i], fallbacks[i], opt, 0, 0.0) for i in range(len(texts))]
    url, judge_model, key_env = where
    client = llm_judge.get_client(
        url, judge_model, api_key_env=key_env, **llm_judge.client_options(opt, timeout, max_retries)
    )
    shown = {**_prompt(opt), "max_response_chars": opt["max_response_chars"]}
    reference = judge_service.reference_text(ground_truth, extra_info)
    ref_answer = reference_answer(reference, ground_truth)  # the canaries' reference answer
    shows = judge_service.reference_shown(PAIRWISE, ground_truth, extra_info, **_prompt(opt))  # what a tie must reach
    ref = normalize_number(normalize_text(shows)) if shows is not None else None

    finals = [final_of(t) for t in texts]

    def first(i: int) -> float | None:
        """``rule_first``'s grade (``decides``) of answer ``i``."""
        grade = lambda m: gsm8k.grade(texts[i], ground_truth, m)  # noqa: E731
        return decides(grade(opt["rule_mode"]), grade("flexible"), ref is not None and finals[i] == ref)

    async def ask(a: str, b: str) -> tuple:
        """One comparison, ``a`` as A: ``(verdict, seconds, voided, cached, agree)`` (``_verdict``; voided: the guard;
        agree: the reply's quotes name both answers as the shown reference's, the tie canaries' right verdict)."""
        answer = await judge_service.ask(
            client, PAIRWISE, (a, b), ground_truth, extra_info, **shown, grounded=opt["grounded"]
        )
        agree = answer.value in ("A", "B") and all(
            guard.pair_guard(answer.text, a, b, shows, choice=side) is None for side in "AB"
        )
        return _verdict(answer, client.url), answer.seconds, answer.problem is not None, answer.cached, agree

    async def tournament_rows() -> list[dict]:
        decided = [first(i) for i in range(len(texts))] if opt["rule_first"] else None
        t, seconds = await _play(texts, opt["scheme"], decided, finals, ref, ask)
        keys = ("flip_rate", "tie_rate", "cycle_rate", "triples_decided", "cycles")
        (stats if stats is not None else {}).update({k: t[k] for k in keys}, calls=sum(t["calls"]))
        rows = [_row(t, i, rules[i], fallbacks[i], opt, t["calls"][i], seconds[i]) for i in range(len(texts))]
        return [{**r, "judge_cycle": t["cycle_rate"]} for r in rows]

    async def versus_reference(i: int) -> dict:
        """Answer ``i`` against the reference solution (right by construction, whatever its text states)."""
        started = time.perf_counter()
        decided = [first(i), 1.0] if opt["rule_first"] else None
        t, _ = await _play([texts[i], reference], "all_pairs", decided, [finals[i], ref], ref, ask)
        calls = sum(t["calls"])
        return _row(t, 0, rules[i], fallbacks[i], opt, calls, time.perf_counter() - started if calls else 0.0)

    async def reference_rows() -> list[dict]:
        return list(await asyncio.gather(*(versus_reference(i) for i in range(len(texts)))))

    every = canary_every_value(opt["canary_every"])
    drawn = {i: k for i, k in enumerate(llm_judge.probe_index(t, ground_truth, every) for t in texts) if k is not None}
    rows, probed = await asyncio.gather(
        tournament_rows() if mode == "tournament" else reference_rows(),
        asyncio.gather(*(_canary(ask, k, ref_answer) for k in drawn.values())),
    )
    for i, counts in zip(drawn, probed):
        rows[i].update(counts)
    return rows


async def compute_score(
    data_source=None, solution_str="", ground_truth=None, extra_info=None, *, mode: str = "pairwise_ref", **kwargs
) -> dict:
    """verl custom reward, ``mode="pairwise_ref"``: the candidate against the reference in both orders; the options
    are ``score_group``'s. A tournament needs the whole group: ``score_group`` (``scripts/train/group_reward.py``).
    """
    if mode != "pairwise_ref":
        raise ValueError(
            f"compute_score scores one sample: mode must be 'pairwise_ref' (tournament: score_group), got {mode!r}"
        )
    return (await score_group([solution_str], ground_truth, extra_info, mode=mode, **kwargs))[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m reward_fns.pairwise_judge", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("answers", nargs="+", help="the answers of one group (pairwise_ref: each against the reference)")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default=llm_judge.DEFAULT_REMOTE_MODEL)
    p.add_argument("--api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--question", default="")
    p.add_argument("--reference", required=True, help="the reference solution (\\n: a new line)")
    p.add_argument("--mode", choices=MODES, default="pairwise_ref")
    p.add_argument("--scheme", choices=SCHEMES, default="circular")
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


# ---------------------------------------------------------------------------- a group reward
# (the contract of scripts/train/group_reward.py: recipes/README.md, "Group rewards")
GROUP_STATS = ("flip_rate", "tie_rate", "cycle_rate", "calls")  # a tournament's, on each row as judge_group_<stat>


async def score_answers(data_sources, solution_strs, ground_truths, extra_infos, *, mode="tournament", **kwargs):
    """A group reward: ``score_group`` over every answer of one GRPO group (one prompt: the first answer's ground
    truth and extra info); in a tournament each row also carries the group's ``judge_group_<stat>`` (``GROUP_STATS``,
    the same on each), the keys by which ``reward_fns.judge_health`` knows win rates against group mates."""
    stats: dict = {}
    rows = await score_group(solution_strs, ground_truths[0], extra_infos[0], mode=mode, stats=stats, **kwargs)
    group = {f"judge_group_{k}": float(stats.get(k, 0)) for k in GROUP_STATS} if mode == "tournament" else {}
    return [{**row, **group} for row in rows]


_one_sample = compute_score


async def compute_score(*args, data_sources=None, solution_strs=None, ground_truths=None, extra_infos=None, **kwargs):
    """verl's custom reward: one sample (``mode="pairwise_ref"``, the per-sample ``compute_score`` above) or, called
    with ``solution_strs``, every answer of one GRPO group (``score_answers``: a tournament unless ``mode`` says)."""
    if solution_strs is None:
        return await _one_sample(*args, **kwargs)
    return await score_answers(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)


#: the options under which ``compute_score`` scores only a whole group (the config check's question)
compute_score.group_only = lambda mode="pairwise_ref", **_: mode == "tournament"
__all__ += ["score_answers"]
