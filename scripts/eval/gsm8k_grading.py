"""Grading one GSM8K answer: its ``predictions.jsonl`` record (``policy_record``), its rule scores
(``score_record``: strict and flexible, ``reward_fns.gsm8k``) and the judge's grade of it (``judge_fields``, parsed by
``reward_fns.parse``). No command of its own; used by ``scripts.eval.gsm8k``.
"""

from __future__ import annotations

from collections.abc import Mapping

from reward_fns import gsm8k
from reward_fns.judge_client import JudgeResult
from reward_fns.parse import parse_score
from scripts.eval.predictions import REPLY_KEEP_CHARS


def policy_record(q: int, k: int, row_id: str, res: JudgeResult) -> dict:
    """The ``predictions.jsonl`` record of answer ``k`` to question ``q`` (the full answer text)."""
    rec = {"kind": "policy", "row_id": row_id, "question_idx": q, "sample": k}
    if res.ok:
        return rec | {"status": "ok", "response": res.text, "finish_reason": res.finish_reason}
    return rec | {"status": "error", "error": str(res.error)}


def score_record(item: Mapping, prec: Mapping, grade: Mapping | None = None) -> dict:
    """The ``samples.jsonl`` record of a policy record: strict / flexible rule scores and the ``judge_*`` fields of
    its ``grade`` (a judge's record) when it has one."""
    # question and reference solution too, so samples.jsonl is data_prep.gsm8k_verify --candidates solutions input
    known = {k: item[k] for k in ("question", "answer") if item.get(k) is not None}
    rec = {"question_idx": prec["question_idx"], "sample": prec["sample"], "ground_truth": item["ground_truth"]}
    rec |= {"status": prec["status"], **known}
    if prec["status"] != "ok":
        zeros = dict.fromkeys((*gsm8k.MODES, *(f"{m}_format" for m in gsm8k.MODES)), 0.0)
        return rec | {"error": prec.get("error"), "response": None} | zeros
    rec["response"] = prec["response"]
    s = {
        m: gsm8k.compute_score(solution_str=prec["response"], ground_truth=item["ground_truth"], mode=m)
        for m in gsm8k.MODES
    }
    rec |= {m: s[m]["score"] for m in gsm8k.MODES} | {f"{m}_format": s[m]["format_ok"] for m in gsm8k.MODES}
    judged = {k: v for k, v in (grade or {}).items() if k.startswith("judge_")}
    return rec | {"finish_reason": prec.get("finish_reason")} | judged


def judge_fields(res: JudgeResult) -> dict:
    """``judge_*`` fields of a sample record from the judge's reply."""
    if not res.ok:
        return {
            "judge_status": "error",
            "judge_reason": res.error.kind,
            "judge_score": None,
            "judge_error": str(res.error),
        }
    parsed = parse_score(res.text)
    status, reason = ("ok", "ok") if parsed.ok else ("parse_fail", parsed.reason)
    reply = {"judge_reply": res.text[:REPLY_KEEP_CHARS], "judge_status": status, "judge_reason": reason}
    return reply | {"judge_score": parsed.value if parsed.ok else None}
