"""data_prep.files.readers (line splitting and numbering as in text mode, per-row UTF-8 errors, ``read_jsonl``)
and data_prep.files.outputs (atomic writes, all-or-nothing output sets: rollback, cleanup, file modes)."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from data_prep.files.errors import DataError
from data_prep.files.outputs import output_set, write_json, write_jsonl, write_parquet, write_text
from data_prep.files.readers import InvalidRow, local_source, read_jsonl

LINE_CASES = [
    # (file bytes, [(row number, row or InvalidRow reason)])
    (b'{"a": 1}\n{"a": 2}\n', [(1, {"a": 1}), (2, {"a": 2})]),
    (b'{"a": 1}\r\n\r\n{"a": 2}', [(1, {"a": 1}), (3, {"a": 2})]),
    (b'{"a": 1}\r{"a": 2}\r\n{"a": 3}\n', [(1, {"a": 1}), (2, {"a": 2}), (3, {"a": 3})]),
    (
        b'{"a": "\xc3\xa9"}\n{"a": "\xe9"}\n[1]\n{bad\n',
        [(1, {"a": "\u00e9"}), (2, "invalid_utf8"), (3, "bad_type"), (4, "invalid_json")],
    ),
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
    if b'\xe9"' not in data:  # valid UTF-8: the same line numbers as reading the file in text mode
        text_mode = [n for n, line in enumerate(io.StringIO(data.decode(), newline=None), 1) if line.strip()]
        assert [n for n, _ in expected] == [n for n in text_mode if n in dict(expected)]


def test_utf8_error_names_the_byte(tmp_path):
    path = str(tmp_path / "f.jsonl")
    open(path, "wb").write(b'{"q": "ok"}\n{"q": "caf\xe9 au lait"}\n')
    ((_, _, bad),) = [r for r in local_source([path]).rows() if isinstance(r[2], InvalidRow)]
    assert (bad.field, bad.reason, bad.message) == ("<line>", "invalid_utf8", "not valid UTF-8 (byte 0xe9 at byte 11)")


READ_JSONL = [
    # (file bytes, rows, [(line, problem)] skipped with on_bad, DataError message without on_bad or None)
    (b'{"a": 1}\n\n{"b": [2]}\n', [{"a": 1}, {"b": [2]}], [], None),
    (
        b'{"a": 1}\n{"a": \n[1]\n{"a": 3}',
        [{"a": 1}, {"a": 3}],
        [(2, "invalid JSON: Expecting value (column 7)"), (3, "expected a JSON object, got list")],
        "line 2: invalid JSON: Expecting value (column 7)",
    ),
    (
        b'{"a": "\xe9"}\n',
        [],
        [(1, "not valid UTF-8 (byte 0xe9 at byte 8)")],
        "line 1: not valid UTF-8 (byte 0xe9 at byte 8)",
    ),
]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
@pytest.mark.parametrize("data,rows,skipped,error", READ_JSONL)
def test_read_jsonl(tmp_path, suffix, data, rows, skipped, error):
    path = str(tmp_path / f"f{suffix}")
    open(path, "wb").write(gzip.compress(data) if suffix.endswith(".gz") else data)
    seen = []
    assert read_jsonl(path, on_bad=lambda n, problem: seen.append((n, problem))) == rows
    assert seen == skipped
    if error is None:
        assert read_jsonl(path) == rows
    else:
        with pytest.raises(DataError) as e:
            read_jsonl(path)
        assert str(e.value) == f"{path}: {error}"


def test_read_jsonl_missing_file(tmp_path):
    with pytest.raises(DataError) as e:
        read_jsonl(str(tmp_path / "none.jsonl"))
    assert str(e.value) == f"input file not found: {tmp_path / 'none.jsonl'}"


def test_limit_and_total(tmp_path):
    path = str(tmp_path / "f.jsonl")
    open(path, "w").write("".join(json.dumps({"i": i}) + "\n" for i in range(5)))
    src = local_source([path, path], limit=7)
    assert src.total() == 7 and [n for _l, n, _r in src.rows()] == [1, 2, 3, 4, 5, 1, 2]


def _write_pq(path):
    import pyarrow as pa

    write_parquet([{"x": 1}], path, pa.schema([("x", pa.int64())]))


def test_outputs_appear_only_at_the_end(tmp_path):
    a, b = str(tmp_path / "new" / "a.parquet"), str(tmp_path / "other" / "s.json")
    with output_set():
        _write_pq(a)
        write_json(b, {"k": 1})
        assert not os.path.exists(a) and not os.path.exists(b)
    assert open(b).read() == '{\n  "k": 1\n}\n' and os.path.getsize(a) > 0
    assert sorted(os.listdir(tmp_path / "new")) == ["a.parquet"]


def test_error_removes_temp_files_and_created_folders(tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "old.json").write_text("old\n")
    with pytest.raises(RuntimeError), output_set():
        write_json(str(tmp_path / "keep" / "old.json"), {})
        write_json(str(tmp_path / "x" / "y" / "z" / "s.json"), {})
        raise RuntimeError("late failure")
    assert sorted(os.listdir(tmp_path)) == ["keep"]
    assert os.listdir(tmp_path / "keep") == ["old.json"] and (tmp_path / "keep" / "old.json").read_text() == "old\n"


def test_rename_failure_rolls_back_every_file(tmp_path, monkeypatch):
    import data_prep.files.outputs as outputs

    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(f"old {name}\n")
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith("b.json") and ".tmp-" in str(src):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    with pytest.raises(DataError, match=r"b\.json: cannot write: No space left on device"), output_set():
        write_json(str(tmp_path / "a.json"), {"new": 1})
        write_json(str(tmp_path / "b.json"), {"new": 2})
        write_json(str(tmp_path / "c.json"), {"new": 3})
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json"]
    assert [(tmp_path / n).read_text() for n in ("a.json", "b.json")] == ["old a.json\n", "old b.json\n"]


def test_write_outside_a_set_is_immediate_and_keeps_the_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        _write_pq(str(tmp_path / "a.parquet"))
        write_json(str(tmp_path / "s.json"), [])
    finally:
        os.umask(old)
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "s.json"]
    assert [os.stat(tmp_path / n).st_mode & 0o777 for n in ("a.parquet", "s.json")] == [0o644, 0o644]


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda d: os.makedirs(os.path.join(d, "o.json")), "o.json: is a folder, not a file"),
        (lambda d: open(os.path.join(d, "f"), "w").close(), "folder .*/f: exists and is not a folder"),
    ],
)
def test_unwritable_destination_is_a_data_error(tmp_path, make, message):
    make(str(tmp_path))
    target = str(tmp_path / "o.json") if "is a folder" in message else str(tmp_path / "f" / "o.json")
    with pytest.raises(DataError, match=message), output_set():
        write_json(target, {})
    assert [n for n in os.listdir(tmp_path) if ".tmp-" in n] == []


WRITES = [  # (writer, file content)
    (lambda p: write_json(p, {"b": 1, "a": "\u00e9", "c": None}), '{\n  "b": 1,\n  "a": "\u00e9",\n  "c": null\n}\n'),
    (lambda p: write_json(p, {"b": 1, "a": [2]}, sort_keys=True), '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'),
    (lambda p: write_json(p, {"t": (1, 2), "x": _Named()}), '{\n  "t": [\n    1,\n    2\n  ],\n  "x": "named"\n}\n'),
    (lambda p: write_jsonl(p, [{"a": "\u00e9"}, {"b": 2}]), '{"a": "\u00e9"}\n{"b": 2}\n'),
    (lambda p: write_jsonl(p, []), ""),
    (lambda p: write_text(p, "# t\n\nbody"), "# t\n\nbody\n"),
    (lambda p: write_text(p, "ends\n"), "ends\n"),
]


class _Named:
    def __str__(self):
        return "named"


@pytest.mark.parametrize("write,content", WRITES)
def test_writes(tmp_path, write, content):
    path = tmp_path / "sub" / "f.txt"
    write(str(path))
    assert path.read_text(encoding="utf-8") == content
    assert os.listdir(tmp_path / "sub") == ["f.txt"]


class _Unprintable:
    def __str__(self):
        raise RuntimeError("cannot serialize")


ATOMIC = [  # a write that fails half-way leaves the previous file as it was, and no temporary file
    ("write_json", lambda p: write_json(p, {"a": 1, "b": _Unprintable()})),
    ("write_jsonl", lambda p: write_jsonl(p, [{"a": 1}, {"b": _Unprintable()}])),
]


@pytest.mark.parametrize("name,write", ATOMIC, ids=[c[0] for c in ATOMIC])
def test_a_failed_write_keeps_the_old_file(tmp_path, name, write):
    path = tmp_path / "report.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(RuntimeError, match="cannot serialize"):
        write(str(path))
    assert path.read_text() == '{"old": true}\n'
    assert os.listdir(tmp_path) == ["report.json"]


@pytest.mark.parametrize(
    "train, test, warned",
    [
        (["a.jsonl"], ["a.jsonl"], ["a.jsonl"]),
        (["a.jsonl", "b.jsonl"], ["./b.jsonl"], ["b.jsonl"]),
        (["a.jsonl"], ["b.jsonl"], []),
        (["a.jsonl"], None, []),
    ],
)
def test_train_and_test_sharing_a_file_is_warned(train, test, warned, tmp_path, monkeypatch, capsys):
    from data_prep import cli, gsm8k

    monkeypatch.chdir(tmp_path)
    for f in ("a.jsonl", "b.jsonl"):
        (tmp_path / f).write_text('{"question": "q", "answer": "#### 1"}\n')
    argv = ["--out", str(tmp_path / "out"), "--train", *train] + (["--test", *test] if test else [])
    cli.resolve_sources(cli.Options.parse(gsm8k.build_parser(), argv, gsm8k.PRESETS))
    err = capsys.readouterr().err
    shared = ", ".join(str(tmp_path / f) for f in warned)
    assert err == (
        f"warning: --train and --test share {shared}: validation on it measures what was trained on "
        "(give a held-out file as --test)\n"
        if warned
        else ""
    )
