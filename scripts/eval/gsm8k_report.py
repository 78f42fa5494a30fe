"""The numbers and the Markdown of ``python -m scripts.eval.gsm8k``'s report: ``policy_metrics`` (strict / flexible
accuracy, format rates, pass@N), ``judge_metrics`` (judge vs rule: agreement, precision / recall / F1, confusion
counts, score histograms) and ``render_md`` (``report.md``). No command of its own; used by ``scripts.eval.gsm8k``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from reward_fns.gsm8k import MODES
from reward_fns.judge_metrics import ratio
from scripts.report.render import fmt, md_table


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
        for m in MODES:
            out[f"{m}_pass@{n_samples}"] = ratio(sum(any(r[m] for r in rs) for rs in by_q.values()), len(by_q))
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
    f1 = ratio(2 * tp, 2 * tp + fp + fn) if tp else None  # 2PR / (P + R); None without a true positive
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
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "judge_says_correct_rate": ratio(tp + fp, len(graded)),
        "rule_correct_rate": ratio(tp + fn, len(graded)),
        "mean_score_rule_correct": ratio(sum(right), len(right)),
        "mean_score_rule_wrong": ratio(sum(wrong), len(wrong)),
        "score_histogram": {k: {str(s): v.get(s, 0) for s in range(5)} for k, v in hist.items()},
        "parse_fail_reasons": dict(Counter(r["judge_reason"] for r in asked if r["judge_status"] == "parse_fail")),
        "error_kinds": dict(Counter(r["judge_reason"] for r in asked if r["judge_status"] == "error")),
    }


def render_md(report: dict) -> str:
    p = report["policy"]
    prog = report.get("progress") or {}
    title = "# GSM8K evaluation"
    if report.get("partial"):
        grades = f", {prog.get('judge_done')} of {prog.get('judge_total')} judge grades" if report.get("judge") else ""
        title += f" (PARTIAL: {prog.get('done')} of {prog.get('samples')} answers{grades})"
    lines = [
        title,
        "",
        f"- data: `{report['data']}` ({p['n_questions']} questions x {p['n_samples_per_question']} samples)",
        f"- policy: `{report['policy_endpoint']['model']}` via {report['policy_endpoint']['endpoint']}",
        f"- wall time: {fmt(report['wall_s'], 1)} s",
    ]
    if prog.get("reused") or prog.get("judge_reused"):
        lines.append(
            f"- resumed: {prog.get('reused', 0)} answers and {prog.get('judge_reused', 0)} judge grades reused "
            "from predictions.jsonl"
        )
    if report.get("partial"):
        why = f"stopped by {report['stopped_by']}" if report.get("stopped_by") else "not every request finished"
        lines.append(
            f"- **partial** ({why}): the metrics cover the finished answers and grades only. Rerun the same "
            "command to finish."
        )
    lines += ["", "## Policy", ""]
    keys = [k for k in p if k not in ("n_questions", "n_samples_per_question")]
    lines += [md_table(["metric", "value"], [(k, p[k]) for k in keys]), ""]
    j = report.get("judge")
    if j:
        lines += [
            "## Judge vs rule",
            "",
            f"- judge: `{report['judge_endpoint']['model']}` via {report['judge_endpoint']['endpoint']}",
            f"- judge says correct: score >= {j['threshold']}; rule: `{j['rule']}`",
            "",
        ]
        keys = "n_asked n_graded agreement precision recall f1 judge_says_correct_rate rule_correct_rate".split()
        keys += ["mean_score_rule_correct", "mean_score_rule_wrong", "parse_fail_rate", "error_rate"]
        confusion = [("judge correct", j["tp"], j["fp"]), ("judge wrong", j["fn"], j["tn"])]
        lines += [md_table(["metric", "value"], [(k, j[k]) for k in keys]), ""]
        lines += [md_table(["", "rule correct", "rule wrong"], confusion), ""]
        h = j["score_histogram"]
        rows = [[k.replace("_", " ")] + list(h[k].values()) for k in ("rule_correct", "rule_wrong")]
        lines += [md_table(["judge score"] + [str(s) for s in range(5)], rows), ""]
        lines += [f"- judge request error `{k}`: {v}" for k, v in sorted(j["error_kinds"].items())]
        lines += [f"- judge parse failure `{k}`: {v}" for k, v in sorted(j["parse_fail_reasons"].items())]
    return "\n".join(lines)
