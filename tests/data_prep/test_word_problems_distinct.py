"""data_prep.word_problems.generate keeps each question once: a drawn problem whose text was drawn before (in any
split) is skipped, and a budget spent on repeats is a DataError, not a short or repeated split. The draws are
scripted (``problem`` replaced), so which repeat comes when is known exactly."""

from __future__ import annotations

import pytest

from data_prep import word_problems
from data_prep.files.errors import DataError


def scripted(monkeypatch, questions: list[str]) -> list[str]:
    """``problem`` returns ``questions`` in order (then repeats the last); the list of those it returned."""
    drawn: list[str] = []

    def problem(rng, steps, max_number, ops, story="collection"):
        q = questions[min(len(drawn), len(questions) - 1)]
        drawn.append(q)
        return {"question": q, "answer": f"#### {len(drawn)}", "story": story}

    monkeypatch.setattr(word_problems, "problem", problem)
    return drawn


def generate(n_train, n_heldout=0, max_tries=50):
    # no test split: every train/test draw goes to train (the split is the text's hash, a test share of 0)
    return word_problems.generate(
        n_train, 0, steps=1, max_number=20, ops=("add",), seed=0, n_heldout=n_heldout, max_tries=max_tries
    )


@pytest.mark.parametrize(
    "case, questions, n_train, n_heldout, train, heldout",
    [
        ("no repeats", ["a", "b", "c"], 3, 0, ["a", "b", "c"], []),
        ("a repeat at once", ["a", "a", "b", "c"], 3, 0, ["a", "b", "c"], []),
        ("repeats later", ["a", "b", "a", "b", "a", "c"], 3, 0, ["a", "b", "c"], []),
        # the held-out draw shares the record: a train question is not drawn again as a held-out one
        ("a repeat across splits", ["a", "b", "b", "a", "x", "y"], 2, 2, ["a", "b"], ["x", "y"]),
    ],
)
def test_repeated_questions_are_skipped(case, questions, n_train, n_heldout, train, heldout, monkeypatch):
    drawn = scripted(monkeypatch, questions)
    data = generate(n_train, n_heldout)
    assert [r["question"] for r in data["train"]] == train
    assert [r["question"] for r in data["heldout"]] == heldout
    assert data["test"] == [] and drawn == questions  # every scripted draw was used, no more


def test_a_budget_spent_on_repeats_is_an_error(monkeypatch):
    """One distinct question, two asked: 2 x 5 tries all draw ``a``; the second is never accepted."""
    drawn = scripted(monkeypatch, ["a"])
    with pytest.raises(DataError) as e:
        generate(2, max_tries=5)
    assert str(e.value) == (
        "only 1 train / 0 test / 0 heldout distinct problems with these settings (asked 2 / 0 / 0): raise "
        "--max-number or --steps, or ask for fewer"
    )
    assert drawn == ["a"] * 10
