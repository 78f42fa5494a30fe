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
and left out of agreement. A judge that gives no verdict at all (every judge request failed or every
reply unparseable) measured nothing: exit status 4, unless ``--allow-judge-errors``.

Input: a verl parquet from ``python -m data_prep.gsm8k`` (``prompt``, ``reward_model.ground_truth``,
``extra_info.question``/``answer``) or raw GSM8K JSONL/parquet (``question``, ``answer`` ending in
``#### N``; the prompt is then the ``gsm8k_policy`` template, as data prep builds it).

Outputs in ``--out``: ``report.json``, ``report.md``, ``samples.jsonl`` (one scored record per answer),
``predictions.jsonl`` (every policy answer and judge reply, appended as it arrives), ``run.json``
(the settings those replies were made with), ``gsm8k_accuracy.png`` and, with a judge,
``judge_vs_rule.png``.

Results are never only in memory: ``--out`` is checked writable before the first request; a rerun
with the same ``--out`` resumes (answers and grades already in ``predictions.jsonl`` are not requested
again; failed requests are; the policy and judge settings must be the same, else ``--no-resume``);
SIGINT / SIGTERM stop sending requests and write the reports of what finished, marked
``"partial": true``. Reports are written atomically.

Examples (from the repository root):
    python -m scripts.eval.gsm8k --data ../shared/data/gsm8k/test.jsonl --limit 200 \\
        --base-url http://127.0.0.1:8000/v1 --model policy
    python -m scripts.eval.gsm8k --data data/gsm8k/test.parquet --vllm-offline /ckpt/hf \\
        --judge-base-url http://127.0.0.1:8001/v1 --judge-model judge
Exit status: 0 ok; 2 bad input or unwritable --out; 3 every policy request failed; 4 the judge gave no
verdict (every judge request failed or every reply was unparseable; --allow-judge-errors turns this
into 0, e.g. for an untrained judge); 130 / 143 stopped by SIGINT / SIGTERM. The reports are written
in every case but 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from data_prep.files.outputs import write_json, write_jsonl, write_text
from reward_fns import gsm8k, llm_judge
from reward_fns.judge_client import JudgeResult, chat_completions_url
from reward_fns.redact import mask_url
from scripts.eval.backends import backend_info, backend_settings, check_backend, generate
from scripts.eval.cli import InputError, cli_main
from scripts.eval.endpoint import add_endpoint_args, make_client, run_chats
from scripts.eval.figures import gsm8k_figures
from scripts.eval.gsm8k_data import load_items
from scripts.eval.gsm8k_grading import REPLY_KEEP_CHARS, conversation_hash, judge_fields, policy_record, score_record
from scripts.eval.gsm8k_report import judge_metrics, policy_metrics, render_md
from scripts.eval.offline import add_offline_args
from scripts.eval.predictions import PredictionLog, StopSignals, add_output_args, prepare_out_dir, request_ids


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.eval.gsm8k", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    g = ap.add_argument_group("data")
    g.add_argument("--data", required=True, metavar="FILE", help="GSM8K test: verl .parquet or raw .jsonl")
    g.add_argument("--limit", type=int, default=None, metavar="N", help="first N questions only")
    g.add_argument(
        "--n-samples",
        type=int,
        default=1,
        metavar="N",
        help="answers per question (default 1; >1 also reports pass@N; use --temperature > 0)",
    )
    g.add_argument("--policy-prompt-version", default="v1", help="gsm8k_policy template version for raw rows")
    g = ap.add_argument_group("policy endpoint (or --vllm-offline / --hf-offline)")
    add_endpoint_args(g, what="policy", max_tokens=512, concurrency=16)
    add_offline_args(g)
    g.add_argument("--seed", type=int, default=0, help="offline sampling seed (default 0)")
    g = ap.add_argument_group("judge (optional)")
    add_endpoint_args(g, prefix="judge-", what="judge", max_tokens=512, concurrency=16)
    g.add_argument(
        "--judge-threshold",
        type=int,
        default=3,
        choices=range(5),
        metavar="S",
        help="judge says correct when score >= S (default 3)",
    )
    g.add_argument(
        "--judge-prompt",
        default=llm_judge.DEFAULTS["prompt"],
        help=f"judge prompt template (default {llm_judge.DEFAULTS['prompt']})",
    )
    g.add_argument(
        "--judge-prompt-version",
        default=llm_judge.DEFAULTS["prompt_version"],
        help=f"template version (default {llm_judge.DEFAULTS['prompt_version']})",
    )
    g.add_argument(
        "--rule-mode",
        choices=gsm8k.MODES,
        default=llm_judge.DEFAULTS["rule_mode"],
        help="rule the judge is compared with (default strict, as the reward's rule_score)",
    )
    g.add_argument(
        "--allow-judge-errors",
        action="store_true",
        help="exit 0 even when the judge gives no verdict at all (every judge request failed or every "
        "reply unparseable, e.g. an untrained judge); without it such a run exits 4",
    )
    g = add_output_args(ap, default_out="outputs/eval/gsm8k-<data stem>", reused="answers and grades")
    g.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    g.add_argument("--no-progress", action="store_true", help="no progress bars (stderr)")
    return ap


def _run(argv: list[str] | None) -> tuple[dict, int, str | None]:
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
            llm_judge.build_messages(
                "",
                "0",
                {"question": "q", "answer": "a"},
                prompt=args.judge_prompt,
                prompt_version=args.judge_prompt_version,
            )
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"--judge-prompt: {e}") from None
    items = load_items(args.data, args.limit, args.policy_prompt_version)
    if args.judge_model:
        missing = next((i for i, it in enumerate(items) if not it["question"]), None)
        if missing is not None:
            raise InputError(
                f"{args.data}: row {missing + 1}: the judge needs the question: missing column "
                "'extra_info.question' (or 'question')"
            )
    out_dir = args.out or os.path.join("outputs", "eval", "gsm8k-" + os.path.basename(args.data).split(".")[0])
    prepare_out_dir(out_dir)  # before any request: an unwritable --out costs nothing
    n = args.n_samples
    judge_on = bool(args.judge_model)

    qids = request_ids([it["prompt"] for it in items])
    units = [(q, k) for q in range(len(items)) for k in range(n)]
    uid = {(q, k): f"{qids[q]}/s{k}" for q, k in units}
    judge_settings = (
        {
            "model": args.judge_model,
            "temperature": float(args.judge_temperature),
            "max_tokens": int(args.judge_max_tokens),
            "endpoint": mask_url(chat_completions_url(args.judge_base_url)),
        }
        if judge_on
        else None
    )
    log = PredictionLog(
        out_dir, "eval_gsm8k", {"policy": backend_settings(args), "judge": judge_settings}, resume=not args.no_resume
    )
    saved = log.load()

    def judge_conv(u: tuple[int, int]) -> list[dict]:
        it = items[u[0]]
        return llm_judge.build_messages(
            policy[u]["response"],
            it["ground_truth"],
            {"question": it["question"], "answer": it["answer"]},
            prompt=args.judge_prompt,
            prompt_version=args.judge_prompt_version,
        )

    policy: dict[tuple[int, int], dict] = {}
    for q, k in units:
        old = saved.get(("policy", uid[q, k]))
        if old is not None and old.get("status") == "ok":  # failed requests are asked again
            policy[q, k] = {**old, "question_idx": q, "sample": k}
    graded: dict[tuple[int, int], dict] = {}
    if judge_on:
        for u in policy:
            old = saved.get(("judge", uid[u]))
            if (
                old is not None
                and old.get("judge_status") != "error"
                and old.get("request") == conversation_hash(judge_conv(u))
            ):
                graded[u] = {**old, "question_idx": u[0], "sample": u[1]}
    reused, judge_reused = len(policy), len(graded)
    if saved or log.skipped_lines:
        skipped = f"; {log.skipped_lines} lines skipped (cut off, or without a row id)" if log.skipped_lines else ""
        print(
            f"resume: {reused} of {len(units)} answers"
            + (f" and {judge_reused} judge grades" if judge_on else "")
            + f" reused from {log.path}"
            + skipped,
            file=sys.stderr,
        )
    log.begin([policy[u] for u in units if u in policy] + [graded[u] for u in units if u in graded])

    def record_policy(u: tuple[int, int], res: JudgeResult) -> None:
        policy[u] = policy_record(u[0], u[1], uid[u], res)
        graded.pop(u, None)  # a new answer needs a new grade
        log.append(policy[u])

    start = time.monotonic()
    policy_ep = jclient = None
    with StopSignals("requests") as stop:
        try:
            todo = [u for u in units if u not in policy]
            if todo and (args.vllm_offline or args.hf_offline):  # n samples per conversation in one go
                qs = sorted({q for q, _ in todo})
                _, policy_ep = generate(
                    args,
                    [items[q]["prompt"] for q in qs],
                    n=n,
                    desc="policy",
                    progress=not args.no_progress,
                    seed=args.seed,
                    stop=stop,
                    on_result=lambda i, k, res: record_policy((qs[i], k), res),
                    done=len(items) - len(qs),
                    total=len(items),
                )
            elif todo:  # one request per missing answer (no cache when a question has several samples)
                _, policy_ep = generate(
                    args,
                    [items[q]["prompt"] for q, _ in todo],
                    n=1,
                    desc="policy",
                    progress=not args.no_progress,
                    seed=args.seed,
                    cache=n == 1,
                    stop=stop,
                    on_result=lambda j, _k, res: record_policy(todo[j], res),
                    done=reused,
                    total=len(units),
                )
            if judge_on and not stop.stopped:
                jtodo = [u for u in units if u in policy and policy[u]["status"] == "ok" and u not in graded]
                convs = [judge_conv(u) for u in jtodo]

                def record_judge(j: int, res: JudgeResult) -> None:
                    u = jtodo[j]
                    graded[u] = {
                        "kind": "judge",
                        "row_id": uid[u],
                        "question_idx": u[0],
                        "sample": u[1],
                        "request": conversation_hash(convs[j]),
                        **judge_fields(res),
                    }
                    log.append(graded[u])

                if jtodo:
                    jclient = make_client(
                        args.judge_base_url,
                        args.judge_model,
                        api_key_env=args.judge_api_key_env,
                        concurrency=args.judge_concurrency,
                        timeout=args.judge_timeout,
                        max_retries=args.judge_max_retries,
                        max_tokens=args.judge_max_tokens,
                        temperature=args.judge_temperature,
                    )
                    run_chats(
                        jclient,
                        convs,
                        desc="judge",
                        progress=not args.no_progress,
                        on_result=record_judge,
                        stop=stop,
                        done=len(graded),
                        total=len(graded) + len(jtodo),
                    )
        except KeyboardInterrupt:  # a second signal: stop at once, keep what finished
            pass
    wall = time.monotonic() - start

    policy_ep = dict(policy_ep or backend_info(args))
    policy_ep.update(temperature=args.temperature, max_tokens=args.max_tokens)
    done = [u for u in units if u in policy]
    recs = []
    for u in done:
        rec = score_record(items[u[0]], policy[u])
        if u in graded and rec["status"] == "ok":
            rec.update({k: v for k, v in graded[u].items() if k.startswith("judge_")})
        recs.append(rec)
    log.finalize([policy[u] for u in done] + [graded[u] for u in done if u in graded])
    judge_total = sum(policy[u]["status"] == "ok" for u in done) if judge_on else 0
    judge_done = sum(u in graded for u in done) if judge_on else 0
    report: dict = {
        "data": os.path.abspath(args.data),
        "policy_endpoint": policy_ep,
        "policy": policy_metrics(recs, len({q for q, _ in done}), n),
        "partial": len(done) < len(units) or judge_done < judge_total,
        "stopped_by": stop.name,
        "progress": {
            "samples": len(units),
            "done": len(done),
            "reused": reused,
            **(
                {"judge_total": judge_total, "judge_done": judge_done, "judge_reused": judge_reused} if judge_on else {}
            ),
        },
    }
    if judge_on:
        report["judge_endpoint"] = {
            "endpoint": mask_url(jclient.url if jclient else chat_completions_url(args.judge_base_url)),
            "model": args.judge_model,
            "prompt": f"{args.judge_prompt}.{args.judge_prompt_version}",
            **({"client_stats": dict(jclient.stats)} if jclient else {}),
        }
        report["judge"] = judge_metrics(recs, args.judge_threshold, args.rule_mode)
    report["wall_s"] = wall

    for r in recs:
        if r.get("response"):
            r["response"] = r["response"][:REPLY_KEEP_CHARS]
    write_json(os.path.join(out_dir, "report.json"), report)
    md = render_md(report)
    write_text(os.path.join(out_dir, "report.md"), md)
    write_jsonl(os.path.join(out_dir, "samples.jsonl"), recs)
    report["figures"] = [] if args.no_plots or not recs else gsm8k_figures(report, out_dir)
    print(md)
    print(
        f"wrote {out_dir}/report.json, report.md, samples.jsonl, predictions.jsonl"
        + "".join(f", {os.path.basename(f)}" for f in report["figures"])
    )
    if report["policy"]["n_error"]:
        print(
            f"warning: {report['policy']['n_error']}/{report['policy']['n_samples']} policy requests failed",
            file=sys.stderr,
        )
    if report.get("judge") and report["judge"]["n_error"]:
        print(
            f"warning: {report['judge']['n_error']}/{report['judge']['n_asked']} judge requests failed", file=sys.stderr
        )
    return (
        report,
        *exit_status(
            report, stop_status=stop.exit_status if stop.stopped else None, allow_judge_errors=args.allow_judge_errors
        ),
    )


def exit_status(
    report: dict, stop_status: int | None = None, allow_judge_errors: bool = False
) -> tuple[int, str | None]:
    """(exit status, reason printed on stderr) of a finished run (see the module doc)."""
    p, prog, j = report["policy"], report["progress"], report.get("judge")
    if stop_status:
        return stop_status, (
            f"stopped by {report['stopped_by']} after {prog['done']} of {prog['samples']} answers"
            + (f" and {prog['judge_done']} of {prog['judge_total']} judge grades" if j else "")
            + "; the reports cover those (partial); rerun the same command to resume"
        )
    if p["n_samples"] and p["n_error"] == p["n_samples"]:
        return 3, f"all {p['n_samples']} policy requests failed; see {report['policy_endpoint']['endpoint']}"
    if j and j["n_asked"] and j["n_graded"] == 0 and not allow_judge_errors:
        what = (
            f"all {j['n_asked']} judge requests failed"
            if j["n_error"] == j["n_asked"]
            else f"no judge reply had a parseable score ({j['n_parse_fail']} unparseable, {j['n_error']} failed of "
            f"{j['n_asked']})"
        )
        return 4, (
            f"{what}; see {report['judge_endpoint']['endpoint']}: the judge measured nothing "
            "(--allow-judge-errors accepts this, e.g. for an untrained judge)"
        )
    return 0, None


def main(argv: list[str] | None = None) -> int:
    return cli_main(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
