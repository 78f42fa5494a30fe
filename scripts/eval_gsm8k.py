#!/usr/bin/env python3
"""Policy accuracy on GSM8K (strict and flexible), optionally graded by an LLM judge as well.

The policy is reached through an OpenAI-compatible endpoint (``--base-url``/``--model``: a vLLM
server of a HF folder or checkpoint, or an API) or offline with ``--vllm-offline MODEL_PATH`` (GPU)
or ``--hf-offline MODEL_PATH`` (transformers, CPU or GPU).
Each answer is scored by the rule reward ``reward_fns.gsm8k``:

* ``strict``: the number after the last ``####`` equals the reference;
* ``flexible``: the last number anywhere in the answer equals the reference.

With ``--judge-base-url``/``--judge-model`` the same answers are graded by the judge with the
LLM-judge reward's own prompt (``reward_fns.llm_judge.build_messages``, template ``gsm8k_grade``)
and parsed by the shared parser. "Judge says correct" means score >= ``--judge-threshold`` (default
3); it is compared with the rule (``--rule-mode``, default strict, as the reward's ``rule_score``):
agreement, precision / recall / F1 (positive = correct), the confusion counts, mean judge score of
rule-correct and rule-wrong answers. Unparseable judge replies and failed judge requests are counted
and left out of agreement.

Input: a verl parquet from ``python -m data_prep.gsm8k`` (``prompt``, ``reward_model.ground_truth``,
``extra_info.question``/``answer``) or raw GSM8K JSONL/parquet (``question``, ``answer`` ending in
``#### N``; the prompt is then the ``gsm8k_policy`` template, as data prep builds it).

Outputs in ``--out``: ``report.json``, ``report.md``, ``samples.jsonl``, ``gsm8k_accuracy.png`` and,
with a judge, ``judge_vs_rule.png``.

Examples:
    python scripts/eval_gsm8k.py --data ../shared/data/gsm8k/test.jsonl --limit 200 \\
        --base-url http://127.0.0.1:8000/v1 --model policy
    python scripts/eval_gsm8k.py --data data/gsm8k/test.parquet --vllm-offline /ckpt/hf \\
        --judge-base-url http://127.0.0.1:8001/v1 --judge-model judge
Exit status: 0 ok, 2 bad input, 3 every policy request failed (reports are still written).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from eval_common import (  # noqa: E402
    InputError, MISSING, add_endpoint_args, add_offline_args, as_messages, check_backend, fmt, generate, get_path,
    make_client, md_table, pyplot, ratio, read_rows, run_chats, save_fig, write_json, write_jsonl, write_text,
)
from reward_fns import gsm8k, llm_judge  # noqa: E402
from reward_fns.judge_client import JudgeResult  # noqa: E402
from reward_fns.parse import parse_score  # noqa: E402
from reward_fns.prompts import load as load_prompt  # noqa: E402

POLICY_TEMPLATE = "gsm8k_policy"
REPLY_KEEP_CHARS = 4000


# ----------------------------------------------------------------------------- data
def load_items(path: str, limit: int | None, policy_prompt_version: str = "v1") -> list[dict]:
    """``[{prompt, ground_truth, question, answer}]`` from a verl parquet or raw GSM8K rows."""
    rows = read_rows(path, limit)
    first = rows[0]
    items = []
    if "prompt" in first:
        for i, r in enumerate(rows):
            where = f"{path}: row {i + 1}"
            gt = get_path(r, "reward_model.ground_truth")
            if gt is MISSING:
                raise InputError(f"{where}: missing column 'reward_model.ground_truth'; the file has columns {sorted(r)}")
            try:
                gsm8k.reference_number(gt)
            except ValueError as e:
                raise InputError(f"{where}: reward_model.ground_truth: {e}") from None
            question = get_path(r, "extra_info.question", None) or r.get("question")
            answer = get_path(r, "extra_info.answer", None) or r.get("answer")
            items.append({"prompt": as_messages(r["prompt"], f"{where}: prompt"), "ground_truth": str(gt),
                          "question": question, "answer": answer})
        return items
    if "question" in first or "answer" in first:
        template = load_prompt(POLICY_TEMPLATE, policy_prompt_version)
        for i, r in enumerate(rows):
            where = f"{path}: row {i + 1}"
            for col in ("question", "answer"):
                if not isinstance(r.get(col), str) or not r[col].strip():
                    raise InputError(f"{where}: missing column '{col}' (raw GSM8K rows need 'question' and 'answer')")
            try:
                ref = gsm8k.reference_number(r["answer"])
            except ValueError:
                raise InputError(f"{where}: column 'answer' has no final '#### <number>'") from None
            items.append({"prompt": template.render(question=r["question"]), "ground_truth": str(ref),
                          "question": r["question"], "answer": r["answer"]})
        return items
    raise InputError(f"{path}: missing column 'prompt' (verl parquet from data_prep.gsm8k) or 'question' + "
                     f"'answer' (raw GSM8K); the file has columns {sorted(first)}")


# ----------------------------------------------------------------------------- metrics
def score_samples(items: Sequence[Mapping], results: Sequence[Sequence[JudgeResult]]) -> list[dict]:
    """One record per (question, sample) with strict / flexible rule scores."""
    recs = []
    for qi, (item, per) in enumerate(zip(items, results)):
        for si, res in enumerate(per):
            rec = {"question_idx": qi, "sample": si, "ground_truth": item["ground_truth"], "status": "ok"}
            if not res.ok:
                rec.update(status="error", error=str(res.error), response=None, strict=0.0, flexible=0.0,
                           strict_format=0.0, flexible_format=0.0)
            else:
                s = gsm8k.compute_score(solution_str=res.text, ground_truth=item["ground_truth"], mode="strict")
                f = gsm8k.compute_score(solution_str=res.text, ground_truth=item["ground_truth"], mode="flexible")
                rec.update(response=res.text, strict=s["score"], flexible=f["score"], strict_format=s["format_ok"],
                           flexible_format=f["format_ok"], finish_reason=res.finish_reason)
            recs.append(rec)
    return recs


def policy_metrics(recs: Sequence[Mapping], n_questions: int, n_samples: int) -> dict:
    n = len(recs)
    ok = [r for r in recs if r["status"] == "ok"]
    out = {
        "n_questions": n_questions,
        "n_samples_per_question": n_samples,
        "n_samples": n,
        "n_error": n - len(ok),
        "error_rate": ratio(n - len(ok), n),
        "strict_acc": ratio(sum(r["strict"] for r in recs), n),
        "flexible_acc": ratio(sum(r["flexible"] for r in recs), n),
        "strict_format_rate": ratio(sum(r["strict_format"] for r in recs), n),
        "flexible_format_rate": ratio(sum(r["flexible_format"] for r in recs), n),
        "mean_response_chars": ratio(sum(len(r["response"]) for r in ok), len(ok)),
        "truncated_rate": ratio(sum(r.get("finish_reason") == "length" for r in ok), len(ok)),
    }
    if n_samples > 1:
        by_q: dict[int, list[Mapping]] = {}
        for r in recs:
            by_q.setdefault(r["question_idx"], []).append(r)
        out[f"strict_pass@{n_samples}"] = ratio(sum(any(r["strict"] for r in rs) for rs in by_q.values()), len(by_q))
        out[f"flexible_pass@{n_samples}"] = ratio(sum(any(r["flexible"] for r in rs) for rs in by_q.values()), len(by_q))
    return out


def judge_metrics(recs: Sequence[Mapping], threshold: int, rule_key: str) -> dict:
    """Judge (score >= threshold) vs rule (``rule_key`` record field) over samples with a judge verdict."""
    asked = [r for r in recs if r.get("judge_status") is not None]
    graded = [r for r in asked if r["judge_status"] == "ok"]
    n_err = sum(r["judge_status"] == "error" for r in asked)
    n_pf = sum(r["judge_status"] == "parse_fail" for r in asked)
    tp = sum(r["judge_score"] >= threshold and r[rule_key] == 1.0 for r in graded)
    fp = sum(r["judge_score"] >= threshold and r[rule_key] != 1.0 for r in graded)
    fn = sum(r["judge_score"] < threshold and r[rule_key] == 1.0 for r in graded)
    tn = len(graded) - tp - fp - fn
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = None if precision is None or recall is None or precision + recall == 0 else 2 * precision * recall / (precision + recall)
    right = [r["judge_score"] for r in graded if r[rule_key] == 1.0]
    wrong = [r["judge_score"] for r in graded if r[rule_key] != 1.0]
    hist = {"rule_correct": Counter(right), "rule_wrong": Counter(wrong)}
    return {
        "threshold": threshold,
        "rule": rule_key,
        "n_asked": len(asked),
        "n_graded": len(graded),
        "n_error": n_err,
        "n_parse_fail": n_pf,
        "error_rate": ratio(n_err, len(asked)),
        "parse_fail_rate": ratio(n_pf, len(asked) - n_err),
        "agreement": ratio(tp + tn, len(graded)),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "judge_says_correct_rate": ratio(tp + fp, len(graded)),
        "rule_correct_rate": ratio(tp + fn, len(graded)),
        "mean_score_rule_correct": ratio(sum(right), len(right)),
        "mean_score_rule_wrong": ratio(sum(wrong), len(wrong)),
        "score_histogram": {k: {str(s): v.get(s, 0) for s in range(5)} for k, v in hist.items()},
        "parse_fail_reasons": dict(Counter(r["judge_reason"] for r in asked if r["judge_status"] == "parse_fail")),
        "error_kinds": dict(Counter(r["judge_reason"] for r in asked if r["judge_status"] == "error")),
    }


# ----------------------------------------------------------------------------- report
def render_md(report: dict) -> str:
    p = report["policy"]
    lines = ["# GSM8K evaluation", "",
             f"- data: `{report['data']}` ({p['n_questions']} questions x {p['n_samples_per_question']} samples)",
             f"- policy: `{report['policy_endpoint']['model']}` via {report['policy_endpoint']['endpoint']}",
             f"- wall time: {fmt(report['wall_s'], 1)} s", "", "## Policy", ""]
    keys = [k for k in p if k not in ("n_questions", "n_samples_per_question")]
    lines += [md_table(["metric", "value"], [(k, p[k]) for k in keys]), ""]
    j = report.get("judge")
    if j:
        lines += ["## Judge vs rule", "",
                  f"- judge: `{report['judge_endpoint']['model']}` via {report['judge_endpoint']['endpoint']}",
                  f"- judge says correct: score >= {j['threshold']}; rule: `{j['rule']}`", ""]
        keys = ["n_asked", "n_graded", "agreement", "precision", "recall", "f1", "judge_says_correct_rate",
                "rule_correct_rate", "mean_score_rule_correct", "mean_score_rule_wrong", "parse_fail_rate", "error_rate"]
        lines += [md_table(["metric", "value"], [(k, j[k]) for k in keys]), "",
                  md_table(["", "rule correct", "rule wrong"],
                           [("judge correct", j["tp"], j["fp"]), ("judge wrong", j["fn"], j["tn"])]), ""]
        h = j["score_histogram"]
        lines += [md_table(["judge score"] + [str(s) for s in range(5)],
                           [["rule correct"] + [h["rule_correct"][str(s)] for s in range(5)],
                            ["rule wrong"] + [h["rule_wrong"][str(s)] for s in range(5)]]), ""]
        for k, v in sorted(j["error_kinds"].items()):
            lines.append(f"- judge request error `{k}`: {v}")
        for k, v in sorted(j["parse_fail_reasons"].items()):
            lines.append(f"- judge parse failure `{k}`: {v}")
    return "\n".join(lines)


def plot_report(report: dict, out_dir: str) -> list[str]:
    plt = pyplot()
    import numpy as np

    p = report["policy"]
    written = []
    names = ["strict", "flexible"] + [k for k in p if "pass@" in k]
    vals = [p["strict_acc"], p["flexible_acc"]] + [p[k] for k in p if "pass@" in k]
    fig, ax = plt.subplots(figsize=(4.8, 3.8))
    bars = ax.bar(names, [v or 0 for v in vals], color=["#4C72B0", "#55A868", "#8172B3", "#937860"][: len(vals)])
    for b, v in zip(bars, vals):
        ax.annotate(fmt(v, 3), (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                    xytext=(0, 2), textcoords="offset points", fontsize=9)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy")
    ax.set_title(f"GSM8K accuracy, {p['n_questions']} questions\n{report['policy_endpoint']['model']}", fontsize=10)
    written.append(save_fig(fig, os.path.join(out_dir, "gsm8k_accuracy.png")))

    j = report.get("judge")
    if j:
        h = j["score_histogram"]
        x = np.arange(5)
        w = 0.4
        fig, ax = plt.subplots(figsize=(5.6, 3.9))
        ax.bar(x - w / 2, [h["rule_correct"][str(s)] for s in range(5)], w, color="#55A868", label="rule: correct")
        ax.bar(x + w / 2, [h["rule_wrong"][str(s)] for s in range(5)], w, color="#C44E52", label="rule: wrong")
        ax.axvline(j["threshold"] - 0.5, ls="--", color="grey", lw=1, label=f"threshold {j['threshold']}")
        ax.set_xticks(x, [str(s) for s in range(5)])
        ax.set_xlabel("judge score")
        ax.set_ylabel("answers")
        ax.legend(fontsize=8)
        ax.set_title(f"Judge vs {j['rule']} rule: agreement {fmt(j['agreement'], 2)}, P {fmt(j['precision'], 2)}, "
                     f"R {fmt(j['recall'], 2)}, F1 {fmt(j['f1'], 2)}\n{report['judge_endpoint']['model']}", fontsize=9)
        written.append(save_fig(fig, os.path.join(out_dir, "judge_vs_rule.png")))
    return written


# ----------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="eval_gsm8k.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("data")
    g.add_argument("--data", required=True, metavar="FILE", help="GSM8K test: verl .parquet or raw .jsonl")
    g.add_argument("--limit", type=int, default=None, metavar="N", help="first N questions only")
    g.add_argument("--n-samples", type=int, default=1, metavar="N",
                   help="answers per question (default 1; >1 also reports pass@N; use --temperature > 0)")
    g.add_argument("--policy-prompt-version", default="v1", help="gsm8k_policy template version for raw rows")
    g = ap.add_argument_group("policy endpoint (or --vllm-offline / --hf-offline)")
    add_endpoint_args(g, what="policy", max_tokens=512, concurrency=16)
    add_offline_args(g)
    g.add_argument("--seed", type=int, default=0, help="offline sampling seed (default 0)")
    g = ap.add_argument_group("judge (optional)")
    add_endpoint_args(g, prefix="judge-", what="judge", max_tokens=512, concurrency=16)
    g.add_argument("--judge-threshold", type=int, default=3, choices=range(5), metavar="S",
                   help="judge says correct when score >= S (default 3)")
    g.add_argument("--judge-prompt", default=llm_judge.DEFAULTS["prompt"], help="judge prompt template (default gsm8k_grade)")
    g.add_argument("--judge-prompt-version", default=llm_judge.DEFAULTS["prompt_version"], help="template version (default v1)")
    g.add_argument("--rule-mode", choices=gsm8k.MODES, default=llm_judge.DEFAULTS["rule_mode"],
                   help="rule the judge is compared with (default strict, as the reward's rule_score)")
    g = ap.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", default=None, help="report folder (default outputs/eval/gsm8k-<data stem>)")
    g.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    g.add_argument("--no-progress", action="store_true", help="no progress bars")
    return ap


def run(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    check_backend(args, "policy")
    if bool(args.judge_base_url) != bool(args.judge_model):
        raise InputError("a judge needs both --judge-base-url and --judge-model")
    if args.n_samples < 1:
        raise InputError(f"--n-samples must be >= 1, got {args.n_samples}")
    if args.n_samples > 1 and args.temperature == 0:
        print("warning: --n-samples > 1 with --temperature 0 gives (near) identical samples", file=sys.stderr)
    if args.judge_model:  # a bad template name fails before any request is sent
        try:
            llm_judge.build_messages("", "0", {"question": "q", "answer": "a"}, prompt=args.judge_prompt,
                                     prompt_version=args.judge_prompt_version)
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"--judge-prompt: {e}") from None
    items = load_items(args.data, args.limit, args.policy_prompt_version)
    if args.judge_model:
        missing = next((i for i, it in enumerate(items) if not it["question"]), None)
        if missing is not None:
            raise InputError(f"{args.data}: row {missing + 1}: the judge needs the question: missing column "
                             "'extra_info.question' (or 'question')")
    out_dir = args.out or os.path.join("outputs", "eval", "gsm8k-" + os.path.basename(args.data).split(".")[0])
    n = args.n_samples

    start = time.monotonic()
    results, policy_ep = generate(args, [it["prompt"] for it in items], n=n, desc="policy",
                                  progress=not args.no_progress, seed=args.seed)
    policy_ep.update(temperature=args.temperature, max_tokens=args.max_tokens)
    recs = score_samples(items, results)

    report: dict = {"data": os.path.abspath(args.data), "policy_endpoint": policy_ep,
                    "policy": policy_metrics(recs, len(items), n)}
    if args.judge_model:
        todo = [r for r in recs if r["status"] == "ok"]
        convs = []
        for r in todo:
            it = items[r["question_idx"]]
            convs.append(llm_judge.build_messages(
                r["response"], it["ground_truth"], {"question": it["question"], "answer": it["answer"]},
                prompt=args.judge_prompt, prompt_version=args.judge_prompt_version))
        jclient = make_client(args.judge_base_url, args.judge_model, api_key_env=args.judge_api_key_env,
                              concurrency=args.judge_concurrency, timeout=args.judge_timeout,
                              max_retries=args.judge_max_retries, max_tokens=args.judge_max_tokens,
                              temperature=args.judge_temperature)
        jres = run_chats(jclient, convs, desc="judge", progress=not args.no_progress)
        for r, res in zip(todo, jres):
            if not res.ok:
                r.update(judge_status="error", judge_reason=res.error.kind, judge_score=None, judge_error=str(res.error))
                continue
            r["judge_reply"] = res.text[:REPLY_KEEP_CHARS]
            parsed = parse_score(res.text)
            if parsed.ok:
                r.update(judge_status="ok", judge_reason="ok", judge_score=parsed.value)
            else:
                r.update(judge_status="parse_fail", judge_reason=parsed.reason, judge_score=None)
        report["judge_endpoint"] = {"endpoint": jclient.url, "model": args.judge_model,
                                    "prompt": f"{args.judge_prompt}.{args.judge_prompt_version}",
                                    "client_stats": dict(jclient.stats)}
        report["judge"] = judge_metrics(recs, args.judge_threshold, args.rule_mode)
    report["wall_s"] = time.monotonic() - start

    for r in recs:
        if r.get("response"):
            r["response"] = r["response"][:REPLY_KEEP_CHARS]
    write_json(os.path.join(out_dir, "report.json"), report)
    md = render_md(report)
    write_text(os.path.join(out_dir, "report.md"), md)
    write_jsonl(os.path.join(out_dir, "samples.jsonl"), recs)
    report["figures"] = [] if args.no_plots else plot_report(report, out_dir)
    print(md)
    print(f"wrote {out_dir}/report.json, report.md, samples.jsonl"
          + "".join(f", {os.path.basename(f)}" for f in report["figures"]))
    if report["policy"]["n_error"]:
        print(f"warning: {report['policy']['n_error']}/{report['policy']['n_samples']} policy requests failed",
              file=sys.stderr)
    if report.get("judge") and report["judge"]["n_error"]:
        print(f"warning: {report['judge']['n_error']}/{report['judge']['n_asked']} judge requests failed", file=sys.stderr)
    return report


def main(argv: list[str] | None = None) -> int:
    try:
        report = run(argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    p = report["policy"]
    if p["n_samples"] and p["n_error"] == p["n_samples"]:
        print(f"error: all {p['n_samples']} policy requests failed; see {report['policy_endpoint']['endpoint']}",
              file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
