"""Judge training data: final-answer restyling, cut-off candidates, SFT warm-start targets, and the
reference-guided templates of data_prep.gsm8k_verify."""

from __future__ import annotations

import os
import random

import pyarrow.parquet as pq
import pytest

import scripts
from data_prep import judge_sft
from data_prep.perturb import FINAL_STYLES, pick_style, restyle, truncate
from reward_fns.parse import last_number, numbers_equal

SOL = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.\n#### 72"
BODY = "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May."


class Fixed(random.Random):
    """random() always returns ``r`` (number_variant's choice), so every variant is reachable."""

    def __init__(self, r):
        super().__init__(0)
        self.r = r

    def random(self):
        return self.r


@pytest.mark.parametrize(
    "style, r, want",
    [
        ("hash", 0.0, BODY + "\n#### 72"),
        ("the_answer_is", 0.0, BODY + "\nThe answer is 72."),
        ("a_colon", 0.0, BODY + "\nA: 72"),
        ("answer_colon", 0.0, BODY + "\nAnswer: 72"),
        ("boxed", 0.0, BODY + "\nSo the final answer is \\boxed{72}."),
        ("bold", 0.0, BODY + "\n**Final answer:** 72"),
        ("therefore", 0.0, BODY + "\nTherefore, the answer is 72."),
        ("bare", 0.0, BODY + "\n72"),
        ("answer_only", 0.0, "The answer is 72."),
        ("a_colon", 0.8, BODY + "\nA: $72"),  # the same value written differently
        ("a_colon", 0.9, BODY + "\nA: 72.00"),
    ],
)
def test_restyle(style, r, want):
    assert restyle(SOL, style, Fixed(r)) == want
    assert numbers_equal(last_number(want), "72")  # the final answer stays the last number


@pytest.mark.parametrize(
    "style, r, want",
    [
        ("the_answer_is", 0.0, "x\nThe answer is -7."),
        ("hash", 0.8, "x\n#### -7"),
        ("boxed", 0.0, "x\nSo the final answer is \\boxed{-7}."),
    ],
)
def test_restyle_keeps_a_negative_answer_negative(style, r, want):
    """A negative final answer keeps its sign in every style (it was written 7, a wrong answer labelled correct)."""
    assert restyle("x\n#### -7", style, Fixed(r)) == want


def test_restyle_thousands_and_errors():
    assert restyle("x\n#### 1234", "a_colon", Fixed(0.7)) == "x\nA: 1,234"
    assert restyle("no final line", "bare", Fixed(0.0)) == "no final line"
    with pytest.raises(ValueError, match="unknown final-answer style"):
        restyle(SOL, "nope", Fixed(0.0))
    assert {pick_style(str(i)) for i in range(400)} == {s for s, _ in FINAL_STYLES}


@pytest.mark.parametrize("seed", range(20))
def test_truncate_never_states_the_final_answer(seed):
    text = truncate(SOL, SOL, random.Random(seed))
    if text is None:
        return
    assert "####" not in text and "72" not in text.split("\n")[-1]
    assert not numbers_equal(last_number(text), "72") and text.startswith("Natalia sold")


def test_truncate_refuses_short_solutions():
    assert truncate("#### 5", "#### 5", random.Random(0)) is None
    assert truncate("5 + 5 = 10\n#### 10", "#### 10", random.Random(0)) is None


def row(extra, label, prompt_version="gsm8k_grade.v2"):
    return {
        "prompt": [{"role": "user", "content": "q"}],
        "data_source": "gsm8k_verify/x",
        "reward_model": {"ground_truth": label},
        "extra_info": {"prompt_version": prompt_version, **extra},
    }


@pytest.mark.parametrize(
    "r, want",
    [
        (
            row({"answer": "a\n#### 72", "response": "so 72"}, 4),
            "<think>Reference: 72. Candidate: 72. Same.</think><score>4</score>",
        ),
        (
            row({"answer": "a\n#### 72", "response": "A: $62."}, 0),
            "<think>Reference: 72. Candidate: 62. Different.</think><score>0</score>",
        ),
        (
            row({"answer": "a\n#### 72", "response": "no number"}, 0),
            "<think>Reference: 72. Candidate: none. Different.</think><score>0</score>",
        ),
        (
            row({"answer": "a\n#### 72", "response": "48+24 = 72", "candidate": "truncated"}, 0),
            "<think>Reference: 72. Candidate: none. Different.</think><score>0</score>",
        ),
        (
            row(
                {"answer": "a\n#### 72", "response_a": "72", "response_b": "The answer is 62."}, "A", "pairwise_ref.v1"
            ),
            "<think>Reference: 72. A: 72. B: 62.</think><better>A</better>",
        ),
        (
            row({"answer": "a\n#### 72", "response_a": "62", "response_b": "#### 72.00"}, "B", "pairwise.v1"),
            "<think>A: 62. B: 72.00.</think><better>B</better>",
        ),  # no reference in the prompt: none in the answer
    ],
)
def test_sft_targets(r, want):
    assert judge_sft.target(r) == want


@pytest.mark.parametrize(
    "r, reason",
    [
        (
            row({"answer": "a\n#### 72", "response": "so 62"}, 4),
            "rationale_mismatch",
        ),  # label disagrees with the answers
        (row({"answer": "a\n#### 72", "response": "so 72"}, 2), "label_not_0_or_4"),
        (
            row({"answer": "a\n#### 72", "response_a": "62", "response_b": "72"}, "A", "pairwise_ref.v1"),
            "rationale_mismatch",
        ),
        (
            row({"answer": "a\n#### 72", "response_a": "72", "response_b": "72"}, "A", "pairwise_ref.v1"),
            "rationale_mismatch",
        ),
        (
            row({"answer": "a\n#### 72", "response_a": "72", "response_b": "62"}, "C", "pairwise_ref.v1"),
            "label_not_A_or_B",
        ),
        (row({"answer": "a\n#### 72", "response_a": "72", "response_b": "62"}, "A", "nope.v9"), "unknown_prompt"),
        (row({"query": "q"}, "A"), "not_a_judge_row"),
    ],
)
def test_sft_skips(r, reason):
    out, skipped = judge_sft.build([r])
    assert out == [] and dict(skipped) == {reason: 1}


def test_gsm8k_verify_reference_guided_pairs_and_sft(tmp_path):
    model = os.environ.get("VERL_JUDGE_MODEL")
    if not model:
        pytest.skip(os.environ.get("VERL_JUDGE_MODEL_MISSING", "no test model"))
    from data_prep import gsm8k_verify

    src = os.path.join(scripts.ROOT, "tests", "fixtures", "data_prep", "gsm8k_solutions.jsonl")
    gsm = tmp_path / "g.jsonl"
    gsm.write_text(
        "\n".join(
            [
                '{"question": "Tom has 3 apples and buys 4 more. How many?", '
                '"answer": "Tom has 3+4=<<3+4=7>>7 apples.\\n#### 7"}',
                '{"question": "A box holds 12 pens. How many pens are in 5 boxes?", '
                '"answer": "5 boxes hold 5*12=<<5*12=60>>60 pens.\\n#### 60"}',
            ]
        )
        + "\n"
    )
    assert os.path.exists(src)
    # (template, shows the reference solution, shows its final answer as a field)
    for pair_prompt, shows, shows_answer in (
        ("pairwise_ref.v2", True, True),
        ("pairwise_ref.v1", True, False),
        ("pairwise.v1", False, False),
    ):
        out = tmp_path / pair_prompt
        assert (
            gsm8k_verify.main(
                [
                    "--out",
                    str(out),
                    "--train",
                    str(gsm),
                    "--tokenizer",
                    model,
                    "--pair-prompt",
                    pair_prompt,
                    "--no-progress",
                ]
            )
            == 0
        )
        pairs = pq.read_table(out / "pairwise_train.parquet").to_pylist()
        user = pairs[0]["prompt"][-1]["content"]
        assert ("# Reference solution" in user) is shows and pairs[0]["extra_info"]["prompt_version"] == pair_prompt
        want = pairs[0]["extra_info"]["answer"].rsplit("#### ", 1)[1]
        assert (f"\nReference final answer: {want}\n" in user) is shows_answer, user
        point = pq.read_table(out / "pointwise_train.parquet").to_pylist()
        assert point[0]["extra_info"]["prompt_version"] == "gsm8k_grade.v3" and len(point) == 4
        sft, skipped = judge_sft.build(pairs)
        assert len(sft) == 4 and not skipped
    assert (
        gsm8k_verify.main(
            [
                "--out",
                str(tmp_path / "x"),
                "--train",
                str(gsm),
                "--tokenizer",
                model,
                "--pair-prompt",
                "pointwise.v1",
                "--no-progress",
            ]
        )
        == 2
    )  # not a pairwise template


def test_judge_sft_cli_errors(tmp_path, capsys):
    bad_in = tmp_path / "x.parquet"
    bad_in.write_text("not parquet")
    assert judge_sft.main(["--in", str(bad_in), "--out", str(tmp_path / "o.parquet")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "e.parquet"
    pq.write_table(__import__("pyarrow").Table.from_pylist([{"a": 1}]), empty)
    assert judge_sft.main(["--in", str(empty), "--out", str(tmp_path / "o.parquet")]) == 2  # nothing to write
    assert "no row could be turned into SFT data" in capsys.readouterr().err and not (tmp_path / "o.parquet").exists()
