"""Results that survive the run of ``python -m scripts.eval.judge`` / ``scripts.eval.gsm8k``: ``prepare_out_dir``,
``PredictionLog`` (``predictions.jsonl``, reused by a rerun with the same settings, ``run.json``), ``StopSignals``
(SIGINT / SIGTERM stop the requests, ``until_stopped``, for a partial report) and ``write_reports``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from data_prep.files.errors import DataError
from data_prep.files.outputs import write_json, write_jsonl, write_text
from data_prep.files.readers import read_jsonl
from scripts.eval.cli import InputError

T = TypeVar("T")
#: characters of a reply kept in the records (the whole policy answer is in predictions.jsonl)
REPLY_KEEP_CHARS = 4000


def add_output_args(ap, *, default_out: str, reused: str):
    """The output group both evaluators start with (--out, --no-resume); returned for their own options."""
    g = ap.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", default=None, help=f"report folder (default {default_out})")
    resume_help = "request everything again, replacing the predictions.jsonl of an earlier run in --out "
    resume_help += f"(default: {reused} already there with the same settings are reused)"
    g.add_argument("--no-resume", action="store_true", help=resume_help)
    return g


def default_out(out: str | None, data: str, prefix: str) -> str:
    """``--out``, or its default: ``outputs/eval/<prefix><stem of the --data file>``."""
    return out or os.path.join("outputs", "eval", prefix + os.path.basename(data).split(".")[0])


def prepare_out_dir(path: str) -> str:
    """Create ``path`` and prove it writable (a probe file is written and removed), or InputError.

    Called before the first request, so an unwritable ``--out`` costs no work."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"--out {path}: exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out {path}: cannot create the folder ({e.strerror or e})") from None
    try:
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise InputError(f"--out {path}: not writable ({e.strerror or e})") from None
    return path


def request_ids(conversations: Sequence[Sequence[Mapping]]) -> list[str]:
    """A stable id per row from its request content (the chat messages): the same prompt gets the same
    id in every run, whatever the row order or ``--limit``; the k-th repeat of a prompt gets ``-k``."""
    seen: dict[str, int] = {}
    out = []
    for conv in conversations:
        blob = json.dumps([{"role": m["role"], "content": m["content"]} for m in conv], ensure_ascii=False)
        h = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
        seen[h] = seen.get(h, 0) + 1
        out.append(h if seen[h] == 1 else f"{h}-{seen[h]}")
    return out


def _canon(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


class PredictionLog:
    """``DIR/predictions.jsonl``: one JSON object per finished row, appended and flushed as it arrives. ``DIR`` is
    created (``prepare_out_dir``) when the log is: before the first request, so an unwritable ``--out`` costs nothing.

    Every record has ``kind`` (what produced it) and ``row_id`` (``request_ids``). ``DIR/run.json``
    names the tool and the settings of each kind (``backend_settings``). ``load`` returns the records
    of an earlier run with the same ``DIR`` (last record of a row wins; a cut-off last line is
    skipped), or InputError when that run used other settings; ``begin`` rewrites the file with the
    records kept and opens it for appending; ``finalize`` rewrites it atomically in row order.
    """

    def __init__(self, out_dir: str, tool: str, settings: Mapping[str, Any], resume: bool = True):
        self.path = os.path.join(prepare_out_dir(out_dir), "predictions.jsonl")
        self.meta_path = os.path.join(out_dir, "run.json")
        self.tool, self.settings, self.resume = tool, _canon(dict(settings)), resume
        self.skipped_lines, self.saved, self._f, self._lock = 0, {}, None, threading.Lock()

    def load(self) -> dict[tuple[str, str], dict]:
        if not self.resume or not os.path.exists(self.path):
            return {}

        bad: list[int] = []  # e.g. a line cut off when the process was killed
        try:
            saved = read_jsonl(self.path, on_bad=lambda lineno, _problem: bad.append(lineno))
        except DataError as e:
            raise InputError(str(e)) from None
        recs = {(str(r.get("kind", "")), r["row_id"]): r for r in saved if isinstance(r.get("row_id"), str)}
        # a record without a row id: nothing to reuse
        self.skipped_lines = len(bad) + sum(not isinstance(r.get("row_id"), str) for r in saved)
        if not recs:
            return {}
        try:
            with open(self.meta_path, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            raise InputError(
                f"{self.path} has {len(recs)} saved predictions but {self.meta_path} (their settings) "
                "is missing or unreadable; use another --out, or --no-resume to replace them"
            ) from None
        if meta.get("tool") != self.tool:
            raise InputError(f"{self.path} was written by {meta.get('tool')}, not {self.tool}; use another --out")
        old = meta.get("settings") or {}
        for kind in sorted({k for k, _ in recs}):
            if self.settings.get(kind) is None:
                continue  # not part of this run: its records are dropped
            if _canon(old.get(kind)) != self.settings[kind]:
                was = old.get(kind) or {}
                diff = ", ".join(
                    f"{k}: {was.get(k)!r} -> {v!r}" for k, v in self.settings[kind].items() if was.get(k) != v
                )
                raise InputError(
                    f"{self.path} holds {kind} predictions made with other settings "
                    f"({diff or old.get(kind)}); use another --out, or --no-resume to replace them"
                )
        self.saved = {k: v for k, v in recs.items() if self.settings.get(k[0]) is not None}
        return self.saved

    def begin(self, kept: Sequence[Mapping], reused: str) -> None:
        """Say what is reused (``resume: <reused>``) when ``load`` found records or skipped lines, rewrite the file
        with ``kept`` (atomically), write ``run.json`` and open the file for appending."""
        if self.saved or self.skipped_lines:
            note = f"; {self.skipped_lines} lines skipped (cut off, or without a row id)" if self.skipped_lines else ""
            print(f"resume: {reused}{note}", file=sys.stderr)
        write_json(self.meta_path, {"tool": self.tool, "settings": self.settings})
        write_jsonl(self.path, kept)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, rec: Mapping) -> None:
        line = json.dumps(rec, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def finalize(self, records: Sequence[Mapping]) -> None:
        if self._f is not None:
            self._f.close()
        self._f = None
        write_jsonl(self.path, records)


def write_reports(
    out_dir: str, report: dict, md: str, draw: Callable[[dict, str], list[str]] | None, also: str
) -> None:
    """``report.json`` and ``report.md`` (atomically), then the figures ``draw`` makes (their paths in
    ``report["figures"]``, not in report.json); prints the Markdown and what was written (``also``: the other files)."""
    write_json(os.path.join(out_dir, "report.json"), report)
    write_text(os.path.join(out_dir, "report.md"), md)
    report["figures"] = [] if draw is None else draw(report, out_dir)
    print(md)
    print(
        f"wrote {out_dir}/report.json, report.md, {also}"
        + "".join(f", {os.path.basename(f)}" for f in report["figures"])
    )


class StopSignals:
    """``with StopSignals() as stop:`` SIGINT / SIGTERM ask the request loops to stop.

    The first signal sets ``stop.signum`` and runs the ``on_stop`` callbacks (a loop stops sending
    requests and the evaluator writes the reports of what finished); a second one raises
    ``KeyboardInterrupt`` (stop now, e.g. inside a long offline batch). Leaving the block restores the
    previous handlers. Outside the main thread it does nothing.
    """

    def __init__(self, what: str = "requests"):
        self.what, self.signum, self._callbacks, self._old = what, None, [], {}

    @property
    def stopped(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int | None:
        """128 + the signal number (130 SIGINT, 143 SIGTERM) once stopped, else None."""
        return None if self.signum is None else 128 + self.signum

    def on_stop(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Run ``fn`` on the first signal (now, if it came already); ``remove(fn)`` drops it."""
        self._callbacks.append(fn)
        if self.stopped:
            fn()
        return fn

    def remove(self, fn: Callable[[], None]) -> None:
        self._callbacks.remove(fn)

    def _handle(self, signum, _frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        print(
            f"\n{self.name}: stopping, no new {self.what}; writing the reports of what finished "
            "(send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )
        for fn in list(self._callbacks):
            fn()

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
        self._old.clear()


def until_stopped(what: str, work: Callable[[StopSignals], T]) -> tuple[T | None, StopSignals, float]:
    """``work(stop)`` under ``StopSignals(what)``: what it returns (None when a second signal cut it short), the
    signals (``stop.stopped``, ``stop.name``) and the wall time in seconds."""
    start, out = time.monotonic(), None
    with StopSignals(what) as stop:
        try:
            out = work(stop)
        except KeyboardInterrupt:  # a second signal: stop at once, keep what finished
            pass
    return out, stop, time.monotonic() - start
