"""Policy accuracy on GSM8K (strict and flexible), optionally graded by an LLM judge as well.

The policy is an OpenAI-compatible endpoint (``--base-url``/``--model``) or offline ``--vllm-offline MODEL_PATH``
(GPU) / ``--hf-offline MODEL_PATH`` (transformers). Each answer is scored by the rule reward ``reward_fns.gsm8k``:
``strict`` (the number after the last ``####``) and ``flexible`` (the last number anywhere) against the reference.

With ``--judge-base-url``/``--judge-model`` the judge grades the same answers with the LLM-judge reward's own prompt
(``reward_fns.llm_judge.build_messages``, ``gsm8k_grade``); "correct" is score >= ``--judge-threshold`` (default 3),
compared with the rule (``--rule-mode``, default strict): agreement, precision / recall / F1 (positive = correct),
confusion counts, mean judge score of rule-correct and rule-wrong answers. Unparseable replies and failed requests are
counted and left out of agreement; a judge with no verdict at all exits 4 unless ``--allow-judge-errors``.

Input: a verl parquet from ``python -m data_prep.gsm8k`` or raw GSM8K JSONL/parquet (``question``, ``answer`` ending
in ``#### N``; prompted with the ``gsm8k_policy`` template, as data prep does).

Outputs in ``--out``: ``report.json``, ``report.md``, ``samples.jsonl`` (one scored record per answer),
``predictions.jsonl`` (every reply, appended as it arrives), ``run.json`` (the settings), ``gsm8k_accuracy.png`` and,
with a judge, ``judge_vs_rule.png``. A rerun with the same ``--out`` resumes (same settings, else ``--no-resume``);
SIGINT / SIGTERM write the reports of what finished, ``"partial": true``.

Examples (from the repository root):
    python -m scripts.eval.gsm8k --data ../shared/data/gsm8k/test.jsonl --limit 200 \\
        --base-url http://127.0.0.1:8000/v1 --model policy
    python -m scripts.eval.gsm8k --data data/gsm8k/test.parquet --vllm-offline /ckpt/hf \\
        --judge-base-url http://127.0.0.1:8001/v1 --judge-model judge
Exit status: 0 ok; 2 bad input or unwritable --out; 3 every policy request failed; 4 the judge gave no verdict
(--allow-judge-errors makes it 0); 130 / 143 stopped by SIGINT / SIGTERM. Reports are written in every case but 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from data_prep.files.outputs import write_jsonl
from reward_fns import gsm8k, llm_judge
from reward_fns.judge_client import JudgeResult
from reward_fns.redact import mask_url
from scripts.eval.backends import Backend, add_backend_args, generate
from scripts.eval.cli import InputError, cli_main, from_args, new_parser
from scripts.eval.endpoint import add_endpoint_args
from scripts.eval.figures import gsm8k_figures
from scripts.eval.gsm8k_data import load_items
from scripts.eval.gsm8k_grading import judge_fields, policy_record, score_record
from scripts.eval.gsm8k_report import judge_metrics, policy_metrics, render_md
from scripts.eval.predictions import (
    REPLY_KEEP_CHARS,
    PredictionLog,
    StopSignals,
    add_output_args,
    default_out,
    request_ids,
    until_stopped,
    write_reports,
)


def build_parser() -> argparse.ArgumentParser:
    ap = new_parser("scripts.eval.gsm8k", __doc__)
    g = ap.add_argument_group("data")
    g.add_argument("--data", required=True, metavar="FILE", help="GSM8K test: verl .parquet or raw .jsonl")
    g.add_argument("--limit", type=int, default=None, metavar="N", help="first N questions only")
    n_help = "answers per question (default 1; >1 also reports pass@N; use --temperature > 0)"
    g.add_argument("--n-samples", type=int, default=1, metavar="N", help=n_help)
    g.add_argument("--policy-prompt-version", default="v1", help="gsm8k_policy template version for raw rows")
    g = ap.add_argument_group("policy endpoint (or --vllm-offline / --hf-offline)")
    add_backend_args(g, what="policy")
    g.add_argument("--seed", type=int, default=0, help="offline sampling seed (default 0)")
    g = ap.add_argument_group("judge (optional)")
    add_endpoint_args(g, prefix="judge-", what="judge")
    threshold_help = "judge says correct when score >= S (default 3)"
    g.add_argument("--judge-threshold", type=int, default=3, choices=range(5), metavar="S", help=threshold_help)
    prompt, version, rule = (llm_judge.DEFAULTS[k] for k in ("prompt", "prompt_version", "rule_mode"))
    g.add_argument("--judge-prompt", default=prompt, help=f"judge prompt template (default {prompt})")
    g.add_argument("--judge-prompt-version", default=version, help=f"template version (default {version})")
    rule_help = "rule the judge is compared with (default strict, as the reward's rule_score)"
    g.add_argument("--rule-mode", choices=gsm8k.MODES, default=rule, help=rule_help)
    errors_help = "exit 0 even when the judge gives no verdict at all (every judge request failed or every reply "
    errors_help += "unparseable, e.g. an untrained judge); without it such a run exits 4"
    g.add_argument("--allow-judge-errors", action="store_true", help=errors_help)
    g = add_output_args(ap, default_out="outputs/eval/gsm8k-<data stem>", reused="answers and grades")
    g.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    g.add_argument("--no-progress", action="store_true", help="no progress bars (stderr)")
    return ap


@dataclass(frozen=True)
class Options:
    """The command line (``build_parser``), parsed once by ``parse_options``."""

    data: str
    limit: int | None
    n_samples: int
    policy_prompt_version: str
    policy: Backend
    seed: int
    judge: Backend | None  # None: no judge
    judge_threshold: int
    judge_prompt: str
    judge_prompt_version: str
    rule_mode: str
    allow_judge_errors: bool
    out: str
    no_resume: bool
    no_plots: bool
    no_progress: bool

    def judge_messages(self, item: Mapping, response: str) -> list[dict]:
        """The judge's request for ``response`` to ``item`` (``reward_fns.llm_judge``'s prompt)."""
        reference = {"question": item["question"], "answer": item["answer"]}
        shown = dict(prompt=self.judge_prompt, prompt_version=self.judge_prompt_version)
        return llm_judge.build_messages(response, item["ground_truth"], reference, **shown)


def parse_options(argv: list[str] | None) -> Options:
    """The command line, checked before any file is read."""
    args = build_parser().parse_args(argv)
    policy = from_args(Backend, args)
    policy.check("policy")
    if bool(args.judge_base_url) != bool(args.judge_model):
        raise InputError("a judge needs both --judge-base-url and --judge-model")
    if args.n_samples < 1:
        raise InputError(f"--n-samples must be >= 1, got {args.n_samples}")
    if args.n_samples > 1 and args.temperature == 0:
        print("warning: --n-samples > 1 with --temperature 0 gives (near) identical samples", file=sys.stderr)
    judge = from_args(Backend, args, prefix="judge_") if args.judge_model else None
    out = default_out(args.out, args.data, "gsm8k-")
    options = from_args(Options, args, policy=policy, judge=judge, out=out)
    if judge:  # a bad template name fails before any request is sent
        try:
            options.judge_messages({"question": "q", "answer": "a", "ground_truth": "0"}, "")
        except (FileNotFoundError, ValueError) as e:
            raise InputError(f"--judge-prompt: {e}") from None
    return options


def _run(argv: list[str] | None) -> tuple[dict, int, str | None]:
    options = parse_options(argv)
    items = load_items(options.data, options.limit, options.policy_prompt_version, need_question=bool(options.judge))
    run = Answers(options, items)
    _, stop, wall = until_stopped("requests", run.ask)
    recs = run.finish()
    report = run.report(recs, stop.name, wall)
    kept = [r | {"response": r["response"][:REPLY_KEEP_CHARS]} if r.get("response") else r for r in recs]
    write_jsonl(os.path.join(options.out, "samples.jsonl"), kept)
    draw = None if options.no_plots or not recs else gsm8k_figures
    write_reports(options.out, report, render_md(report), draw, also="samples.jsonl, predictions.jsonl")
    p, j = report["policy"], report.get("judge")
    if p["n_error"]:
        print(f"warning: {p['n_error']}/{p['n_samples']} policy requests failed", file=sys.stderr)
    if j and j["n_error"]:
        print(f"warning: {j['n_error']}/{j['n_asked']} judge requests failed", file=sys.stderr)
    return report, *exit_status(report, stop_status=stop.exit_status, allow_judge_errors=options.allow_judge_errors)


class Answers:
    """The run's answers and judge grades by ``(question, sample)``: those an earlier run in ``--out`` saved, then
    each new one as it arrives (appended to ``predictions.jsonl``), and the report they make."""

    def __init__(self, options: Options, items: list[dict]):
        self.options, self.items = options, items
        qids = request_ids([it["prompt"] for it in items])
        self.units = [(q, k) for q in range(len(items)) for k in range(options.n_samples)]
        self.uid = {(q, k): f"{qids[q]}/s{k}" for q, k in self.units}
        # the judge's resume key has no "backend" (only an endpoint grades)
        judge = {k: v for k, v in options.judge.settings().items() if k != "backend"} if options.judge else None
        settings = {"policy": options.policy.settings(), "judge": judge}
        self.log = PredictionLog(options.out, "eval_gsm8k", settings, resume=not options.no_resume)
        self.policy: dict[tuple[int, int], dict] = {}  # (question, sample) -> its predictions.jsonl record
        self.graded: dict[tuple[int, int], dict] = {}
        self.policy_ep = self.judge_ep = None  # generate's endpoint info, once asked
        self._reuse(self.log.load())

    def _judge_conv(self, u: tuple[int, int]) -> list[dict]:
        return self.options.judge_messages(self.items[u[0]], self.policy[u]["response"])

    def _request(self, u: tuple[int, int]) -> str:
        """The id of the judge's request for answer ``u``: a saved grade is reused for this very request only."""
        return request_ids([self._judge_conv(u)])[0]

    def _reuse(self, saved: dict) -> None:
        """Keep the saved answers (failed requests are asked again) and the grades of exactly those answers."""
        for q, k in self.units:
            old = saved.get(("policy", self.uid[q, k]))
            if old is not None and old.get("status") == "ok":
                self.policy[q, k] = {**old, "question_idx": q, "sample": k}
        if self.options.judge:
            for u in self.policy:
                old = saved.get(("judge", self.uid[u]))
                if old and old.get("judge_status") != "error" and old.get("request") == self._request(u):
                    self.graded[u] = {**old, "question_idx": u[0], "sample": u[1]}
        self.reused, self.judge_reused = len(self.policy), len(self.graded)
        grades = f" and {self.judge_reused} judge grades" if self.options.judge else ""
        what = f"{self.reused} of {len(self.units)} answers{grades} reused from {self.log.path}"
        self.log.begin([*self.policy.values(), *self.graded.values()], reused=what)

    def ask(self, stop: StopSignals) -> None:
        """The missing answers, then (with a judge, unless stopped) the missing grades."""
        self._ask_policy(stop)
        if self.options.judge and not stop.stopped:
            self._ask_judge(stop)

    def _answered(self, u: tuple[int, int], res: JudgeResult) -> None:
        self.policy[u] = policy_record(u[0], u[1], self.uid[u], res)
        self.graded.pop(u, None)  # a new answer needs a new grade
        self.log.append(self.policy[u])

    def _ask_policy(self, stop: StopSignals) -> None:
        o = self.options
        todo = [u for u in self.units if u not in self.policy]
        if o.policy.kind == "endpoint":  # one request per missing answer (no cache when a question has several samples)
            asks, total = [[u] for u in todo], len(self.units)
        else:  # offline: the n samples of a question in one go
            asks, total = [[(q, k) for k in range(o.n_samples)] for q in sorted({q for q, _ in todo})], len(self.items)
        if asks:
            how = dict(desc="policy", progress=not o.no_progress, seed=o.seed, done=total - len(asks), total=total)
            prompts = [self.items[us[0][0]]["prompt"] for us in asks]
            answered = lambda i, k, res: self._answered(asks[i][k], res)  # noqa: E731
            _, self.policy_ep = generate(
                o.policy, prompts, n=len(asks[0]), cache=o.n_samples == 1, on_result=answered, stop=stop, **how
            )

    def _ask_judge(self, stop: StopSignals) -> None:
        todo = [u for u in self.units if u in self.policy and self.policy[u]["status"] == "ok" and u not in self.graded]
        convs = [self._judge_conv(u) for u in todo]

        def graded(j: int, _k: int, res: JudgeResult) -> None:
            u = todo[j]
            record = {"kind": "judge", "row_id": self.uid[u], "question_idx": u[0], "sample": u[1]}
            self.graded[u] = record | {"request": self._request(u), **judge_fields(res)}
            self.log.append(self.graded[u])

        if todo:
            done = len(self.graded)
            bar = dict(desc="judge", progress=not self.options.no_progress, done=done, total=done + len(todo))
            _, self.judge_ep = generate(self.options.judge, convs, on_result=graded, stop=stop, **bar)

    def finish(self) -> list[dict]:
        """The scored records of the finished answers (``samples.jsonl``), with their grades; the log in order."""
        done = [u for u in self.units if u in self.policy]
        recs = [score_record(self.items[u[0]], self.policy[u], self.graded.get(u)) for u in done]
        self.log.finalize([self.policy[u] for u in done] + [self.graded[u] for u in done if u in self.graded])
        return recs

    def report(self, recs: list[dict], stopped_by: str | None, wall: float) -> dict:
        """``report.json``: the endpoints, the metrics of ``recs`` and how far the run got."""
        o = self.options
        done = [u for u in self.units if u in self.policy]
        judge_total = sum(self.policy[u]["status"] == "ok" for u in done) if o.judge else 0
        judge_done = sum(u in self.graded for u in done) if o.judge else 0
        progress = {"samples": len(self.units), "done": len(done), "reused": self.reused}
        if o.judge:
            progress.update(judge_total=judge_total, judge_done=judge_done, judge_reused=self.judge_reused)
        report: dict = {
            "data": os.path.abspath(o.data),
            "policy_endpoint": o.policy.described(self.policy_ep),
            "policy": policy_metrics(recs, len({q for q, _ in done}), o.n_samples),
            "partial": len(done) < len(self.units) or judge_done < judge_total,
            "stopped_by": stopped_by,
            "progress": progress,
        }
        if o.judge:
            ep = self.judge_ep or o.judge.info()
            report["judge_endpoint"] = {
                "endpoint": mask_url(ep["endpoint"]),
                "model": o.judge.model,
                "prompt": f"{o.judge_prompt}.{o.judge_prompt_version}",
                **({"client_stats": ep["client_stats"]} if "client_stats" in ep else {}),
            }
            report["judge"] = judge_metrics(recs, o.judge_threshold, o.rule_mode)
        report["wall_s"] = wall
        return report


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
