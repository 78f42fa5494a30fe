"""The shared command line (``cli.Options``: parsed once, derived values resolved there) and the small shared
pieces the converters build on: the pairwise gate of gsm8k_verify, pair order selection, SFT rows, parquet reading."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_prep import cli, gsm8k, gsm8k_verify, pairwise, pointwise
from data_prep.files.errors import BadRow, DataError
from data_prep.files.readers import read_parquet
from data_prep.lengths import LengthGate
from data_prep.rows import Draft, sft_row
from data_prep.summary import Stats


def _parse(module, argv, cls=cli.Options):
    return cls.parse(module.build_parser(), ["--out", "o", *argv], module.PRESETS)


@pytest.mark.parametrize(
    "module, argv, want",
    [
        (
            gsm8k,
            [],
            {"hub": ("openai/gsm8k", "main", None), "fmt": None, "max_len": 512, "progress": True, "truncate": None},
        ),
        (
            gsm8k,
            ["--train", "a.jsonl", "--max-prompt-length", "0", "--no-progress", "--truncate-field"],
            {"hub": None, "train": ("a.jsonl",), "test": (), "max_len": None, "progress": False, "truncate": ()},
        ),
        (gsm8k, ["--hf-path", "me/gsm", "--hf-name", "x"], {"hub": ("me/gsm", "x", None)}),
        (pointwise, [], {"hub": ("agentscope-ai/OpenJudge", None, None), "fmt": "openjudge", "max_len": 2048}),
        (pointwise, ["--hf", "helpsteer2"], {"hub": ("nvidia/HelpSteer2", None, None), "fmt": "helpsteer"}),
        (pointwise, ["--train", "a.jsonl"], {"fmt": None}),  # detected from each split's first row
        (pointwise, ["--train", "a.jsonl", "--format", "generic"], {"fmt": "generic"}),
        (
            pairwise,
            ["--hf", "hh-rlhf-helpful", "--hf-data-dir", "d", "--exclude", "x.jsonl"],
            {"hub": ("Anthropic/hh-rlhf", None, "d"), "fmt": "hh-rlhf", "exclude": ("x.jsonl",)},
        ),
    ],
)
def test_options_resolve_derived_values(module, argv, want):
    o = _parse(module, argv)
    got = {k: getattr(o, k) for k in want}
    if "hub" in got and got["hub"] is not None:
        got["hub"] = (o.hub.path, o.hub.name, o.hub.data_dir)
    assert got == want
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.seed = 1


def test_subclass_fields_come_from_their_flags():
    argv = ["--candidates", "solutions", "--references", "r.jsonl", "--orders", "1"]
    o = _parse(gsm8k_verify, argv, gsm8k_verify.VerifyOptions)
    got = (o.candidates, o.references, o.orders, o.pairs_per_question, o.grade_prompt)
    assert got == ("solutions", ("r.jsonl",), 1, 1, "gsm8k_grade.v3")


@pytest.mark.parametrize(
    "point, pair",
    [
        (None, None),
        ((), ()),
        (("question",), ("query",)),
        (("response",), ("chosen", "rejected")),
        (("question", "reference"), ("query",)),
        (("reference",), ("_none_",)),  # nothing of a pairwise prompt may be cut
    ],
)
def test_pair_gate_maps_truncate_fields(point, pair):
    assert gsm8k_verify.pair_gate(LengthGate(None, 10, point)).truncate == pair


@pytest.mark.parametrize(
    "given, kept",
    [
        ({"enable_thinking": False}, {"enable_thinking": False}),
        ({"tokenize": False, "return_dict": True, "enable_thinking": False}, {"enable_thinking": False}),
        ({"return_tensors": "pt", "add_generation_prompt": False}, {}),
    ],
)
def test_a_gate_keeps_only_the_chat_template_kwargs_it_does_not_set_itself(given, kept):
    gate = LengthGate(None, 10, None, given)
    assert (gate.kwargs, dataclasses.replace(gate, max_len=5).kwargs) == (kept, kept)


@pytest.mark.parametrize(
    "orders, seed, want", [(2, 0, ["A", "B"] * 3), (1, 0, ["B", "A", "A"]), (1, 5, ["A", "A", "B"])]
)
def test_order_selector(orders, seed, want):
    accepted = [(None, [Draft([], "A", {}), Draft([], "B", {})], ()) for _ in range(3)]
    run = cli.SplitRun("train", None, Stats(split="train"))
    picked = pairwise.order_selector(orders, seed)(run, accepted)
    assert [d.ground_truth for d, _ in picked] == want and run.stats.extra == {"pairs_written": 3}


def test_sft_row():
    row = {"prompt": [{"role": "user", "content": "q", "extra": 1}], "data_source": "d"}
    assert sft_row(row, "a") == {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "data_source": "d",
    }


def test_read_parquet(tmp_path):
    good, bad = tmp_path / "g.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist([{"a": 1}, {"a": 2}]), good)
    bad.write_text("not parquet")
    assert read_parquet(str(good)) == [{"a": 1}, {"a": 2}]
    with pytest.raises(DataError, match=f"^{bad}: cannot read: "):
        read_parquet(str(bad))


def test_policy_sft_rows():
    from data_prep import policy_sft

    row = {"prompt": [{"role": "user", "content": "q"}], "extra_info": {"answer": "1+2=<<1+2=3>>3 \n#### 3 "}}
    assert policy_sft.build([row])[0]["messages"][-1] == {"role": "assistant", "content": "1+2=3 \n#### 3"}
    with pytest.raises(DataError, match=r"^row 0: needs 'prompt' and extra_info.answer ending '#### N'"):
        policy_sft.build([{**row, "extra_info": {"answer": "3"}}])


@pytest.mark.parametrize(
    "row, fmt",
    [
        ({"input": [], "output": [], "chosen": "c", "rejected": "r", "query": "q"}, "openjudge"),
        ({"chosen": "c", "rejected": "r", "query": "q"}, "generic"),
        ({"chosen": "c", "rejected": "r"}, "hh-rlhf"),
    ],
)
def test_split_run_detects_the_format_of_its_first_row(row, fmt):
    run = cli.SplitRun("train", None, Stats(split="train"))
    assert (run.detect(row, pairwise.SIGNATURES), run.detect({}, pairwise.SIGNATURES)) == (fmt, fmt)


def test_split_run_names_the_keys_of_an_unknown_format():
    with pytest.raises(BadRow, match=r"^cannot tell the input format from keys \['foo'\]; pass --format$"):
        cli.SplitRun("train", None, Stats(split="train")).detect({"foo": 1}, pointwise.SIGNATURES)
