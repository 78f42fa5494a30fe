"""The word-problem testbed (data_prep/word_problems.py, data_prep/stories.py): its stories' wordings, the splits
(train and test share stories; held-out stories only in heldout.jsonl), determinism and the CLI's errors."""

from __future__ import annotations

import json
import random
import re
import string

import pytest

from data_prep import stories, word_problems
from data_prep.files.errors import DataError


@pytest.mark.parametrize(
    "n, times, part",
    [
        (2, "twice", "half"),
        (3, "three times", "a third"),
        (4, "four times", "a quarter"),
        (5, "five times", "a fifth"),
        (6, "6 times", "one sixth"),
        (12, "12 times", "one twelfth"),
        (13, "13 times", "1/13"),
    ],
)
def test_multiplier_words(n, times, part):
    assert (stories.times(n), stories.part(n)) == (times, part)


FIELDS = {"name", "name_pos", "p", "q", "o", "pos", "item", "n", "times", "part", "day", "prev"}


@pytest.mark.parametrize("story", sorted(stories.STORIES))
def test_every_wording_uses_known_fields(story):
    s = stories.STORIES[story]
    for field in ("opening", "add", "sub", "mul", "div", "question"):
        for w in getattr(s, field):
            used = {f for _, f, _, _ in string.Formatter().parse(w) if f}
            assert used <= FIELDS, (story, w)


@pytest.mark.parametrize(
    "story, seed, question, answer",
    [
        (
            "days",
            3,
            "Emma reads 12 pages of a book on Monday. On Tuesday, she reads 20 more pages than on Monday. On "
            "Wednesday, she reads one eighth as many pages as on Tuesday. How many pages does Emma read on Wednesday?",
            "Start: 12 pages.\n20 more: 12 + 20 = <<12+20=32>>32 pages.\n"
            "One of 8 equal shares: 32 / 8 = <<32/8=4>>4 pages."
            "\n#### 4",
        ),
        ("bus", 0, None, None),
    ],
)
def test_problem_reads_and_solves(story, seed, question, answer):
    p = word_problems.problem(random.Random(seed), 2, 20, word_problems.OPS, story)
    if question:
        assert (p["question"], p["answer"], p["story"]) == (question, answer, story)
    # the working's arithmetic is right and ends on the answer, whatever the story
    lines = p["answer"].split("\n")
    for line in lines[1:-1]:
        a, op, b, r = re.search(r"<<(\d+)([-+*/])(\d+)=(\d+)>>", line).groups()
        assert {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b), "/": int(a) // int(b)}[op] == int(r)
    assert lines[-1] == "#### " + re.search(r"=(\d+)>>", lines[-2]).group(1)


def test_splits_keep_held_out_stories_apart():
    data = word_problems.generate(300, 60, steps=2, max_number=20, ops=word_problems.OPS, seed=1, n_heldout=50)
    assert [len(data[s]) for s in word_problems.SPLITS] == [300, 60, 50]
    stories_of = {s: {r["story"] for r in rows} for s, rows in data.items()}
    assert stories_of["heldout"] == set(stories.HELDOUT)
    assert stories_of["train"] == stories_of["test"] == set(stories.STORIES) - set(stories.HELDOUT)
    questions = [r["question"] for rows in data.values() for r in rows]
    assert len(set(questions)) == len(questions)
    # a held-out story's sentences never appear in training: the training's text has none of its distinctive words
    train_text = " ".join(r["question"] for r in data["train"])
    for word in ("bus", "shelf", "batteries", "teams", "Monday"):
        assert word not in train_text


def test_same_seed_same_files_and_settings(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        assert (
            word_problems.main(
                [
                    "--out",
                    str(out),
                    "--train-size",
                    "40",
                    "--test-size",
                    "10",
                    "--heldout-size",
                    "10",
                    "--heldout-stories",
                    "bus,days",
                ]
            )
            == 0
        )
    for f in ("train.jsonl", "test.jsonl", "heldout.jsonl", "settings.json"):
        assert (a / f).read_bytes() == (b / f).read_bytes()
    settings = json.load(open(a / "settings.json"))
    assert (settings["heldout_stories"], settings["heldout"], "bus" in settings["stories"]) == (
        ["bus", "days"],
        10,
        False,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heldout-stories", "moon"], "--heldout-stories must name some, not all"),
        (["--heldout-stories", ",".join(stories.STORIES)], "--heldout-stories must name some, not all"),
        (["--heldout-size", "-1"], "must be >= 0"),
        (["--train-size", "0", "--test-size", "0", "--heldout-size", "0", "--heldout-stories", ""], "not all 0"),
        # a story named twice is drawn twice as often; held-out stories with no held-out problems keep them out of
        # train and test for nothing
        (["--heldout-stories", "shop,shop"], "--heldout-stories: shop named more than once, got shop,shop"),
        (["--heldout-stories", "shop,bus,shop,bus"], "--heldout-stories: shop,bus named more than once, got shop,bus"),
        (
            ["--heldout-size", "0", "--heldout-stories", "shop"],
            "--heldout-size 0 with --heldout-stories shop: those stories would be kept out of train and test with "
            "none of their problems written; give a size > 0, or --heldout-stories '' for none",
        ),
        (["--heldout-size", "0"], "--heldout-size 0 with --heldout-stories "),  # the default stories too
        # a repeated op would be drawn twice as often as the others
        (["--ops", "add,add"], "--ops must be a comma-separated subset of add,sub,mul,div, each once, got add,add"),
        (["--ops", "add,sub,add"], "each once, got add,sub,add"),
        # a held-out size with no held-out stories would write no held-out split, silently
        (["--heldout-stories", "", "--heldout-size", "5"], "--heldout-size 5 needs --heldout-stories"),
        (["--heldout-stories", " , ", "--heldout-size", "1000"], "--heldout-size 1000 needs --heldout-stories"),
    ],
)
def test_bad_settings_are_errors(args, message, tmp_path, capsys):
    assert word_problems.main(["--out", str(tmp_path / "wp"), *args]) == 2
    assert message in capsys.readouterr().err


def test_no_held_out_stories(tmp_path):
    assert (
        word_problems.main(["--out", str(tmp_path), "--train-size", "20", "--test-size", "5", "--heldout-stories", ""])
        == 0
    )
    assert not (tmp_path / "heldout.jsonl").exists()
    with pytest.raises(DataError, match="needs --heldout-stories"):
        word_problems.generate(5, 5, steps=1, max_number=20, ops=("add",), seed=0, n_heldout=3, heldout=())
