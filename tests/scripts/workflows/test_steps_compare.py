"""``steps.compare``: the held-out evaluations' table (``compare.md``), and a clear error for a report that is no
JSON object (it was an AttributeError on ``.get``)."""

from __future__ import annotations

import json

import pytest

from scripts.workflows import steps
from scripts.workflows.stages import Stages


@pytest.mark.parametrize(
    "reports, table",
    [
        ({"eval_before": {"overall": {"acc": 0.5}}}, "| eval_before | 0.500 |"),
        ({"eval_sft": {"acc": 1.0}}, "| eval_sft | 1.000 |"),  # a report without "overall": its top level
    ],
)
def test_compare_rows(tmp_path, reports, table):
    for name, rep in reports.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(rep))
    text = steps.compare(Stages(str(tmp_path)), "t", ("acc",))
    assert table in text and (tmp_path / "compare.md").read_text() == text


@pytest.mark.parametrize("rep", [[1, 2], "text", 3])
def test_compare_refuses_a_report_that_is_no_object(tmp_path, rep):
    (tmp_path / "eval_sft").mkdir()
    (tmp_path / "eval_sft" / "report.json").write_text(json.dumps(rep))
    with pytest.raises(ValueError, match=r"eval_sft/report.json: not an evaluation report \(a JSON object\)"):
        steps.compare(Stages(str(tmp_path)), "t", ("acc",))
