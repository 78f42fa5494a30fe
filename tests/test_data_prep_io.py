"""data_prep.readers (line splitting and numbering as in text mode, per-row UTF-8 errors) and
data_prep.outputs (all-or-nothing output sets: rollback, cleanup, file modes)."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from data_prep.errors import DataError
from data_prep.outputs import output_set, write_json, write_parquet
from data_prep.readers import InvalidRow, local_source

LINE_CASES = [
    # (file bytes, [(row number, row or InvalidRow reason)])
    (b'{"a": 1}\n{"a": 2}\n', [(1, {"a": 1}), (2, {"a": 2})]),
    (b'{"a": 1}\r\n\r\n{"a": 2}', [(1, {"a": 1}), (3, {"a": 2})]),
    (b'{"a": 1}\r{"a": 2}\r\n{"a": 3}\n', [(1, {"a": 1}), (2, {"a": 2}), (3, {"a": 3})]),
    (b'{"a": "\xc3\xa9"}\n{"a": "\xe9"}\n[1]\n{bad\n', [(1, {"a": "\u00e9"}), (2, "invalid_utf8"), (3, "bad_type"), (4, "invalid_json")]),
    (b"\n \n", []),
]


def _rows(path):
    return [(n, row.reason if isinstance(row, InvalidRow) else row) for _loc, n, row in local_source([path]).rows()]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
@pytest.mark.parametrize("data,expected", LINE_CASES)
def test_jsonl_lines_numbered_like_text_mode(tmp_path, suffix, data, expected):
    path = str(tmp_path / f"f{suffix}")
    open(path, "wb").write(gzip.compress(data) if suffix.endswith(".gz") else data)
    assert _rows(path) == expected
    if b"\xe9\"" not in data:  # valid UTF-8: the same line numbers as reading the file in text mode
        text_mode = [n for n, line in enumerate(io.StringIO(data.decode(), newline=None), 1) if line.strip()]
        assert [n for n, _ in expected] == [n for n in text_mode if n in dict(expected)]


def test_utf8_error_names_the_byte(tmp_path):
    path = str(tmp_path / "f.jsonl")
    open(path, "wb").write(b'{"q": "ok"}\n{"q": "caf\xe9 au lait"}\n')
    (_, _, bad), = [r for r in local_source([path]).rows() if isinstance(r[2], InvalidRow)]
    assert (bad.field, bad.reason, bad.message) == ("<line>", "invalid_utf8", "not valid UTF-8 (byte 0xe9 at byte 11)")


def test_limit_and_total(tmp_path):
    path = str(tmp_path / "f.jsonl")
    open(path, "w").write("".join(json.dumps({"i": i}) + "\n" for i in range(5)))
    src = local_source([path, path], limit=7)
    assert src.total == 7 and [n for _l, n, _r in src.rows()] == [1, 2, 3, 4, 5, 1, 2]


def _write_pq(path):
    import pyarrow as pa

    write_parquet([{"x": 1}], path, pa.schema([("x", pa.int64())]))


def test_outputs_appear_only_at_the_end(tmp_path):
    a, b = str(tmp_path / "new" / "a.parquet"), str(tmp_path / "other" / "s.json")
    with output_set():
        _write_pq(a)
        write_json({"k": 1}, b)
        assert not os.path.exists(a) and not os.path.exists(b)
    assert open(b).read() == '{\n  "k": 1\n}\n' and os.path.getsize(a) > 0
    assert sorted(os.listdir(tmp_path / "new")) == ["a.parquet"]


def test_error_removes_temp_files_and_created_folders(tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "old.json").write_text("old\n")
    with pytest.raises(RuntimeError), output_set():
        write_json({}, str(tmp_path / "keep" / "old.json"))
        write_json({}, str(tmp_path / "x" / "y" / "z" / "s.json"))
        raise RuntimeError("late failure")
    assert sorted(os.listdir(tmp_path)) == ["keep"]
    assert os.listdir(tmp_path / "keep") == ["old.json"] and (tmp_path / "keep" / "old.json").read_text() == "old\n"


def test_rename_failure_rolls_back_every_file(tmp_path, monkeypatch):
    import data_prep.outputs as outputs

    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(f"old {name}\n")
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith("b.json") and ".tmp-" in str(src):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    with pytest.raises(DataError, match=r"b\.json: cannot write: No space left on device"), output_set():
        write_json({"new": 1}, str(tmp_path / "a.json"))
        write_json({"new": 2}, str(tmp_path / "b.json"))
        write_json({"new": 3}, str(tmp_path / "c.json"))
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]
    assert [(tmp_path / n).read_text() for n in ("a.json", "b.json")] == ["old a.json\n", "old b.json\n"]


def test_write_outside_a_set_is_immediate_and_keeps_the_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        _write_pq(str(tmp_path / "a.parquet"))
        write_json([], str(tmp_path / "s.json"))
    finally:
        os.umask(old)
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "s.json"]
    assert [os.stat(tmp_path / n).st_mode & 0o777 for n in ("a.parquet", "s.json")] == [0o644, 0o644]


@pytest.mark.parametrize("make,message", [
    (lambda d: os.makedirs(os.path.join(d, "o.json")), "o.json: is a folder, not a file"),
    (lambda d: open(os.path.join(d, "f"), "w").close(), "folder .*/f: exists and is not a folder"),
])
def test_unwritable_destination_is_a_data_error(tmp_path, make, message):
    make(str(tmp_path))
    target = str(tmp_path / "o.json") if "is a folder" in message else str(tmp_path / "f" / "o.json")
    with pytest.raises(DataError, match=message), output_set():
        write_json({}, target)
    assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []
