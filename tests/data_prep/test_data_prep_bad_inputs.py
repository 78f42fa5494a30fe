"""Bad inputs through the real data_prep CLIs: each ends in a clear one-line error and a non-zero exit
status (or, where the bad part is one row and ``--on-bad-row skip`` is given, a counted skip), never a
traceback, never half-written or stale-beside-new outputs, never leftover temporary files.

Every case runs ``<module>.main(argv)`` (what ``python -m data_prep.<module>`` runs); a few also run as
real subprocesses. ``test_zz_tally`` prints "bad inputs tried / handled cleanly" and requires all.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

import scripts
from data_prep import gsm8k, gsm8k_verify, overlap, pairwise, pointwise

ROOT = scripts.ROOT
MODULES = {
    "gsm8k": gsm8k,
    "pointwise": pointwise,
    "pairwise": pairwise,
    "gsm8k_verify": gsm8k_verify,
    "overlap": overlap,
}

GSM = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3+4=<<3+4=7>>7\n#### 7"},
    {"question": "A pen costs 2 dollars. How much do 5 pens cost?", "answer": "5*2=<<5*2=10>>10\n#### 10"},
    {"question": "Sam reads 6 pages a day for 3 days. How many pages?", "answer": "6*3=<<6*3=18>>18\n#### 18"},
]


def _jsonl(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def make_inputs(d) -> None:
    """Every input file the cases use, in folder ``d``."""
    os.makedirs(d, exist_ok=True)
    w = lambda name, data: open(os.path.join(d, name), "wb").write(data)  # noqa: E731
    w("good.jsonl", _jsonl(GSM))
    w("good2.jsonl", _jsonl(GSM[:2]))
    # row 2 holds the byte 0xff (never valid in UTF-8); rows 1 and 3 are the first two good rows
    w("badutf8.jsonl", _jsonl(GSM[:1]) + b'{"question": "caf\xff?", "answer": "#### 1"}\n' + _jsonl(GSM[1:2]))
    w("badutf8.json", b"[\n" + json.dumps(GSM[0]).encode() + b',\n{"question": "caf\xff?", "answer": "#### 1"}\n]\n')
    full = gzip.compress(_jsonl(GSM) * 200)
    w("trunc.jsonl.gz", full[: len(full) // 2])
    w("notgz.jsonl.gz", _jsonl(GSM))
    w("corrupt.parquet", b"PAR1" + b"\x00garbage" * 20)
    w("empty.jsonl", b"")
    w("allbad.jsonl", _jsonl([{"question": "Where is the answer?"}]))
    w("afile", b"a regular file\n")
    os.makedirs(os.path.join(d, "dir.jsonl"), exist_ok=True)
    os.makedirs(os.path.join(d, "outdir", "train.parquet"), exist_ok=True)  # an output path that is a folder
    w(
        "point_conflict.jsonl",
        _jsonl(
            [
                {"query": "Is water wet?", "response": "Yes.", "score": 4},
                {"query": "Is water wet?", "response": "Yes.", "score": 0},  # same item, opposite label
                {"query": "Name a color.", "response": "Blue.", "score": 3},
                {"query": "Name a color.", "response": "Blue.", "score": 3},  # a plain duplicate
            ]
        ),
    )
    w(
        "pair_conflict.jsonl",
        _jsonl(
            [
                {"query": "Which is kinder?", "chosen": "Please help.", "rejected": "Go away."},
                {
                    "query": "Which is kinder?",
                    "chosen": "Go away.",
                    "rejected": "Please help.",
                },  # the same pair, reversed
                {"query": "Which is right?", "chosen": "2+2=4", "rejected": "2+2=5"},
            ]
        ),
    )
    w(
        "pairs.jsonl",
        _jsonl([{"query": f"Question {i}?", "chosen": f"Good {i}.", "rejected": f"Bad {i}."} for i in range(3)]),
    )
    w("noquery.jsonl", _jsonl([{"text": "no query field here"}, {"score": 3}]))
    w("queries.jsonl", _jsonl([{"question": GSM[0]["question"]}]))


# (id, module, args, exit status, stream, message fragment, files in --out afterwards: None = no folder,
#  "pre" = the outputs of an earlier good run, unchanged)
CASES = [
    # ---- reading
    (
        "utf8_error",
        "gsm8k",
        ["--train", "{in}/badutf8.jsonl"],
        2,
        "err",
        "badutf8.jsonl: row 2: field '<line>': not valid UTF-8 (byte 0xff at byte 18)",
        None,
    ),
    (
        "utf8_skip",
        "gsm8k",
        ["--train", "{in}/badutf8.jsonl", "--on-bad-row", "skip"],
        0,
        "out",
        "    invalid_utf8:<line>                1",
        ["train.parquet"],
    ),
    (
        "utf8_json_array",
        "gsm8k",
        ["--train", "{in}/badutf8.json"],
        2,
        "err",
        "badutf8.json: line 3: not valid UTF-8 (byte 0xff",
        None,
    ),
    (
        "utf8_json_array_skip",
        "gsm8k",
        ["--train", "{in}/badutf8.json", "--on-bad-row", "skip"],
        2,
        "err",
        "a JSON array file cannot skip a single row",
        None,
    ),
    (
        "truncated_gz",
        "gsm8k",
        ["--train", "{in}/trunc.jsonl.gz"],
        2,
        "err",
        "trunc.jsonl.gz: truncated or corrupt gzip data after line",
        None,
    ),
    (
        "truncated_gz_skip",
        "pairwise",
        ["--train", "{in}/trunc.jsonl.gz", "--on-bad-row", "skip"],
        2,
        "err",
        "trunc.jsonl.gz: truncated or corrupt gzip data after line",
        None,
    ),
    ("not_gzip", "gsm8k", ["--train", "{in}/notgz.jsonl.gz"], 2, "err", "notgz.jsonl.gz: not a gzip file", None),
    (
        "corrupt_parquet",
        "pointwise",
        ["--train", "{in}/corrupt.parquet"],
        2,
        "err",
        "corrupt.parquet: not a readable parquet file",
        None,
    ),
    (
        "input_is_folder",
        "gsm8k",
        ["--train", "{in}/dir.jsonl"],
        2,
        "err",
        "dir.jsonl: is a folder, not an input file",
        None,
    ),
    (
        "verify_truncated_gz",
        "gsm8k_verify",
        ["--train", "{in}/trunc.jsonl.gz"],
        2,
        "err",
        "trunc.jsonl.gz: truncated or corrupt gzip data after line",
        None,
    ),
    # ---- outputs
    (
        "out_under_a_file",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--out", "{in}/afile/sub"],
        2,
        "err",
        "afile/sub: cannot create the folder:",
        "n/a",
    ),
    (
        "out_is_a_file",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--out", "{in}/afile"],
        2,
        "err",
        "afile: exists and is not a folder",
        "n/a",
    ),
    (
        "output_path_is_folder",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--out", "{in}/outdir"],
        2,
        "err",
        "outdir/train.parquet: is a folder, not a file",
        "n/a",
    ),
    (
        "summary_is_folder",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--summary-json", "{in}"],
        2,
        "err",
        "--summary-json",
        None,
    ),
    (
        "summary_under_a_file",
        "pairwise",
        ["--train", "{in}/pairs.jsonl", "--summary-json", "{in}/afile/s.json"],
        2,
        "err",
        "--summary-json",
        None,
    ),
    (
        "verify_summary_is_folder",
        "gsm8k_verify",
        ["--train", "{in}/good.jsonl", "--summary-json", "{in}"],
        2,
        "err",
        "--summary-json",
        None,
    ),
    # a failing run keeps every earlier output as it was (not a new train.parquet beside an old test.parquet)
    (
        "second_split_fails",
        "gsm8k",
        ["--train", "{in}/good2.jsonl", "--test", "{in}/allbad.jsonl"],
        2,
        "err",
        "allbad.jsonl: row 1: field 'answer': missing",
        "pre",
    ),
    (
        "summary_fails_after_splits",
        "gsm8k",
        ["--train", "{in}/good2.jsonl", "--test", "{in}/good2.jsonl", "--summary-json", "{in}"],
        2,
        "err",
        "--summary-json",
        "pre",
    ),
    # ---- nothing useful
    (
        "empty_input",
        "gsm8k",
        ["--train", "{in}/empty.jsonl"],
        2,
        "err",
        "train: no rows to write: {in}/empty.jsonl has no rows",
        None,
    ),
    (
        "all_rows_skipped",
        "gsm8k",
        ["--train", "{in}/allbad.jsonl", "--on-bad-row", "skip"],
        2,
        "err",
        "train: no rows to write: 1 rows read from {in}/allbad.jsonl, none kept (skipped: missing:answer 1)",
        None,
    ),
    (
        "empty_second_split",
        "pairwise",
        ["--train", "{in}/pairs.jsonl", "--test", "{in}/empty.jsonl"],
        2,
        "err",
        "test: no rows to write",
        None,
    ),
    (
        "verify_empty",
        "gsm8k_verify",
        ["--train", "{in}/empty.jsonl"],
        2,
        "err",
        "pointwise_train: no rows to write",
        None,
    ),
    (
        "empty_allowed",
        "gsm8k",
        ["--train", "{in}/empty.jsonl", "--no-fail-on-empty"],
        0,
        "out",
        "  rows written   0",
        ["train.parquet"],
    ),
    (
        "limit_zero",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--limit", "0"],
        2,
        "err",
        "argument --limit: expected an integer >= 1, got 0",
        None,
    ),
    (
        "overlap_train_without_query",
        "overlap",
        ["--train", "{in}/noquery.jsonl", "--eval", "{in}/queries.jsonl"],
        2,
        "err",
        "noquery.jsonl: none of its 2 rows has query text",
        "n/a",
    ),
    (
        "overlap_eval_without_query",
        "overlap",
        ["--train", "{in}/good.jsonl", "--eval", "{in}/noquery.jsonl"],
        2,
        "err",
        "noquery.jsonl: none of its 2 rows has query text",
        "n/a",
    ),
    (
        "overlap_empty_eval",
        "overlap",
        ["--train", "{in}/good.jsonl", "--eval", "{in}/empty.jsonl"],
        2,
        "err",
        "empty.jsonl: it has no rows, so no query text",
        "n/a",
    ),
    (
        "overlap_without_query_allowed",
        "overlap",
        ["--train", "{in}/noquery.jsonl", "--eval", "{in}/queries.jsonl", "--no-fail-on-empty"],
        0,
        "out",
        "result: no overlap",
        "n/a",
    ),
    (
        "overlap_summary_is_folder",
        "overlap",
        ["--train", "{in}/good.jsonl", "--eval", "{in}/queries.jsonl", "--summary-json", "{in}"],
        2,
        "err",
        "--summary-json",
        "n/a",
    ),
    (
        "overlap_corrupt_parquet",
        "overlap",
        ["--train", "{in}/corrupt.parquet", "--eval", "{in}/queries.jsonl"],
        2,
        "err",
        "corrupt.parquet: not a readable parquet file",
        "n/a",
    ),
    # ---- labels
    (
        "conflicting_pointwise_labels",
        "pointwise",
        ["--train", "{in}/point_conflict.jsonl"],
        0,
        "out",
        "    conflicting_label                  2\n    duplicate                          1",
        ["train.parquet"],
    ),
    (
        "conflicting_pairwise_preference",
        "pairwise",
        ["--train", "{in}/pair_conflict.jsonl"],
        0,
        "out",
        "  skipped        2\n    conflicting_label                  2",
        ["train.parquet"],
    ),
    # ---- options
    (
        "tokenizer_missing",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--tokenizer", "{in}/no-such-model"],
        2,
        "err",
        "--tokenizer {in}/no-such-model: cannot load a tokenizer",
        None,
    ),
    (
        "prompt_version_unknown",
        "pointwise",
        ["--train", "{in}/point_conflict.jsonl", "--prompt-version", "v9"],
        2,
        "err",
        "--prompt-version v9: no prompt template pointwise.v9",
        None,
    ),
    (
        "exclude_is_folder",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--exclude", "{in}/dir.jsonl"],
        2,
        "err",
        "dir.jsonl: is a folder, not an input file",
        None,
    ),
    (
        "exclude_with_bad_utf8_row",
        "gsm8k",
        ["--train", "{in}/good.jsonl", "--exclude", "{in}/badutf8.jsonl"],
        0,
        "out",
        "    excluded_overlap                   2",
        ["train.parquet"],
    ),
]

RESULTS: dict[str, str] = {}  # case id -> "" (clean) or what went wrong


def _argv(module: str, args: list[str], sub: dict, model_path: str) -> list[str]:
    argv = [a.format(**sub) for a in args]
    if module != "overlap":
        if "--out" not in argv:
            argv = ["--out", sub["out"], *argv]
        if "--tokenizer" not in argv:
            argv += ["--tokenizer", model_path]
    return argv + ["--no-progress"]


def _temp_leftovers(top: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, dirs, files in os.walk(top) for f in files + dirs if ".tmp-" in f)


def _snapshot(folder: str) -> dict[str, bytes]:
    return {f: open(os.path.join(folder, f), "rb").read() for f in sorted(os.listdir(folder))}


def run_case(case, tmp_path, model_path, capsys) -> tuple[str, int | None, str, str]:
    """Run one case; returns (problem or "", exit status, stdout, stderr)."""
    cid, module, args, rc, stream, fragment, after = case
    d_in, out = str(tmp_path / "in"), str(tmp_path / "out")
    make_inputs(d_in)
    sub = {"in": d_in, "out": out, "tmp": str(tmp_path)}
    before = None
    if after == "pre":  # an earlier good run of the same CLI
        assert (
            MODULES[module].main(
                _argv(module, ["--train", "{in}/good.jsonl", "--test", "{in}/good.jsonl"], sub, model_path)
            )
            == 0
        )
        before = _snapshot(out)
    capsys.readouterr()
    try:
        got = MODULES[module].main(_argv(module, args, sub, model_path))
    except SystemExit as e:  # argparse
        got = e.code
    except BaseException as e:  # noqa: BLE001 - a raw exception is what this test exists to catch
        cap = capsys.readouterr()
        return f"raised {type(e).__name__}: {e}", None, cap.out, cap.err
    cap = capsys.readouterr()
    text = cap.err if stream == "err" else cap.out
    problems = []
    if got != rc:
        problems.append(f"exit status {got}, expected {rc}")
    if fragment.format(**sub) not in text:
        problems.append(f"message {fragment.format(**sub)!r} not in {stream}: {text[-400:]!r}")
    if "Traceback" in cap.err:
        problems.append("traceback on stderr")
    err_lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    if rc != 0:
        usage = bool(err_lines) and err_lines[0].startswith("usage:")  # argparse: usage, then one error line
        if not err_lines or (not usage and len(err_lines) != 1) or not (err_lines[-1].startswith("error: ") or usage):
            problems.append(f"stderr is not one 'error: ...' line: {cap.err[-400:]!r}")
    elif err_lines:
        problems.append(f"unexpected stderr: {cap.err[-400:]!r}")
    leftovers = _temp_leftovers(str(tmp_path))
    if leftovers:
        problems.append(f"temporary files left: {leftovers}")
    if after is None and os.path.exists(out):
        problems.append(f"--out created: {sorted(os.listdir(out))}")
    elif after == "pre" and _snapshot(out) != before:
        problems.append("earlier outputs changed by the failing run")
    elif isinstance(after, list) and sorted(os.listdir(out)) != after:
        problems.append(f"--out holds {sorted(os.listdir(out)) if os.path.exists(out) else None}, expected {after}")
    return "; ".join(problems), got, cap.out, cap.err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, model_path, capsys):
    problem, _rc, _out, _err = run_case(case, tmp_path, model_path, capsys)
    RESULTS[case[0]] = problem
    assert not problem, f"{case[0]}: {problem}"


# exact counts for the cases that succeed with counted skips
SUMMARIES = [
    ("utf8_skip", {"rows_read": 3, "items": 2, "rows_written": 2, "skipped": {"invalid_utf8:<line>": 1}}),
    (
        "conflicting_pointwise_labels",
        {
            "rows_read": 4,
            "items": 1,
            "rows_written": 1,
            "skipped": {"conflicting_label": 2, "duplicate": 1},
            "labels": {"3": 1},
        },
    ),
    (
        "conflicting_pairwise_preference",
        {
            "rows_read": 3,
            "items": 1,
            "rows_written": 2,
            "skipped": {"conflicting_label": 2},
            "labels": {"A": 1, "B": 1},
        },
    ),
    ("exclude_with_bad_utf8_row", {"rows_read": 3, "items": 1, "rows_written": 1, "skipped": {"excluded_overlap": 2}}),
    ("empty_allowed", {"rows_read": 0, "items": 0, "rows_written": 0, "skipped": {}}),
]


@pytest.mark.parametrize("cid,expected", SUMMARIES, ids=[s[0] for s in SUMMARIES])
def test_skip_counts_exact(cid, expected, tmp_path, model_path, capsys):
    case = next(c for c in CASES if c[0] == cid)
    sj = str(tmp_path / "summary.json")
    case = (*case[:2], [*case[2], "--summary-json", sj], *case[3:])
    problem, _rc, _out, _err = run_case(case, tmp_path, model_path, capsys)
    assert not problem, f"{cid}: {problem}"
    o = json.load(open(sj))["outputs"][0]
    assert {k: o[k] for k in expected} == expected
    assert pq.read_metadata(o["path"]).num_rows == expected["rows_written"]


@pytest.mark.parametrize("cid", ["utf8_error", "summary_is_folder", "overlap_train_without_query"])
def test_bad_input_subprocess(cid, tmp_path, model_path):
    """The same through ``python -m``: the process exit status and one stderr line, no traceback."""
    cid, module, args, rc, _stream, fragment, _after = next(c for c in CASES if c[0] == cid)
    d_in = str(tmp_path / "in")
    make_inputs(d_in)
    sub = {"in": d_in, "out": str(tmp_path / "out"), "tmp": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", f"data_prep.{module}", *_argv(module, args, sub, model_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == rc
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and fragment.format(**sub) in p.stderr
    assert p.stdout == ""
    assert not os.path.exists(sub["out"])


def test_zz_tally(tmp_path_factory, model_path, capsys):
    """Every case tried (again, if this test runs alone) and handled cleanly; prints the tally."""
    for case in CASES:
        if case[0] not in RESULTS:
            RESULTS[case[0]] = run_case(case, tmp_path_factory.mktemp(case[0]), model_path, capsys)[0]
    bad = {k: v for k, v in RESULTS.items() if v}
    with capsys.disabled():
        print(f"\ndata_prep bad inputs tried: {len(RESULTS)}, handled cleanly: {len(RESULTS) - len(bad)}")
    assert len(RESULTS) == len(CASES) == 36
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


def test_word_problems_rerun_replaces_the_whole_set(tmp_path):
    """D1: a rerun into the same folder with --test-size 0 leaves no old test.jsonl beside settings that say 0."""
    from data_prep import word_problems

    out = str(tmp_path / "wp")
    assert word_problems.main(["--out", out, "--train-size", "30", "--test-size", "5", "--heldout-size", "5"]) == 0
    assert sorted(os.listdir(out)) == ["heldout.jsonl", "settings.json", "test.jsonl", "train.jsonl"]
    argv = ["--out", out, "--train-size", "30", "--test-size", "0", "--heldout-size", "0", "--heldout-stories", ""]
    assert word_problems.main(argv) == 0
    assert sorted(os.listdir(out)) == ["settings.json", "train.jsonl"]
    assert [json.load(open(os.path.join(out, "settings.json")))[s] for s in ("test", "heldout")] == [0, 0]


@pytest.mark.parametrize("value", ["1000001", str(10**21)])
def test_word_problems_bounds_max_number(value, tmp_path, capsys):
    """D5: a huge --max-number is refused at once (it used to hang listing divisors)."""
    from data_prep import word_problems

    assert word_problems.main(["--out", str(tmp_path / "wp"), "--max-number", value]) == 2
    assert f"--max-number must be 2-1,000,000, got {value}" in capsys.readouterr().err
    assert not (tmp_path / "wp").exists()
