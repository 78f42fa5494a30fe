"""The questions ``python -m scripts.eval.gsm8k --data FILE`` asks: ``load_items`` reads a verl parquet from
``python -m data_prep.gsm8k`` (``prompt``, ``reward_model.ground_truth``, ``extra_info.question``/``answer``) or raw
GSM8K rows (``question``, ``answer`` ending in ``#### N``; the prompt is then the ``gsm8k_policy`` template, as data
prep builds it) and checks each reference number. No command of its own; used by ``scripts.eval.gsm8k``.
"""

from __future__ import annotations

from reward_fns import gsm8k
from reward_fns.prompts import load as load_prompt
from scripts.eval.cli import InputError
from scripts.eval.rows import as_messages, get_path, read_rows, require_columns

POLICY_TEMPLATE = "gsm8k_policy"


def load_items(path: str, limit: int | None, policy_prompt_version: str, need_question: bool = False) -> list[dict]:
    """``[{prompt, ground_truth, question, answer}]`` from a verl parquet or raw GSM8K rows (``need_question``: each
    with its question text, which a judge needs)."""
    rows = read_rows(path, limit)
    if "prompt" in rows[0]:
        require_columns(rows, ["prompt", "reward_model.ground_truth"], path)
        items = [_verl_item(r, f"{path}: row {i + 1}") for i, r in enumerate(rows)]
    elif "question" in rows[0] or "answer" in rows[0]:
        template = load_prompt(POLICY_TEMPLATE, policy_prompt_version)
        items = [_raw_item(r, f"{path}: row {i + 1}", template) for i, r in enumerate(rows)]
    else:
        raise InputError(
            f"{path}: missing column 'prompt' (verl parquet from data_prep.gsm8k) or 'question' + "
            f"'answer' (raw GSM8K); the file has columns {sorted(rows[0])}"
        )
    missing = next((i for i, it in enumerate(items) if not it["question"]), None) if need_question else None
    if missing is not None:
        raise InputError(
            f"{path}: row {missing + 1}: the judge needs the question: missing column 'extra_info.question' (or "
            "'question')"
        )
    return items


def _verl_item(r: dict, where: str) -> dict:
    gt = get_path(r, "reward_model.ground_truth")
    try:
        gsm8k.reference_number(gt)
    except ValueError as e:
        raise InputError(f"{where}: reward_model.ground_truth: {e}") from None
    question = get_path(r, "extra_info.question", None) or r.get("question")
    answer = get_path(r, "extra_info.answer", None) or r.get("answer")
    return dict(
        prompt=as_messages(r["prompt"], f"{where}: prompt"), ground_truth=str(gt), question=question, answer=answer
    )


def _raw_item(r: dict, where: str, template) -> dict:
    for col in ("question", "answer"):
        if not isinstance(r.get(col), str) or not r[col].strip():
            raise InputError(f"{where}: missing column '{col}' (raw GSM8K rows need 'question' and 'answer')")
    try:
        ref = gsm8k.reference_number(r["answer"])
    except ValueError:
        raise InputError(f"{where}: column 'answer' has no final '#### <number>'") from None
    prompt = template.render(question=r["question"])
    return dict(prompt=prompt, ground_truth=str(ref), question=r["question"], answer=r["answer"])
