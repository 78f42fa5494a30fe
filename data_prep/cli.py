"""What every converter CLI shares: arguments, input/output checks, the per-split loop, summaries, errors.

A converter (``data_prep.gsm8k``, ``pointwise``, ``pairwise``) describes itself as a ``Conversion``
(schema, how a row becomes units, how a unit becomes drafts, the data_source) and calls
``run_conversion``, the one per-split loop:

    check inputs and outputs -> per split: read rows -> units (bad rows, duplicates, conflicting labels,
    --exclude) -> length gate -> drafts -> verl rows -> parquet -> summary (+ --summary-json)

The whole run is one ``output_set``: every split's parquet and the summary JSON are renamed into place
together at the end, or, on any error, none of them (earlier files stay as they were). An output with
no rows is an error (``--fail-on-empty``, default) unless ``--no-fail-on-empty`` is given. ``cli`` turns
a ``DataError`` (or an operating-system error) into one line on stderr, ``error: ...``, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from data_prep.files.errors import DataError
from data_prep.files.outputs import check_output_file, check_output_folder, output_set, write_json, write_parquet
from data_prep.files.readers import Source, hf_source, local_source
from data_prep.lengths import TRUNCATION_MARKER, LengthGate, default_tokenizer_path, load_tokenizer
from data_prep.rows import Builder, Draft, Unit, load_exclusion, make_rows, read_units
from data_prep.summary import Stats, describe_empty, format_summary


# ----------------------------------------------------------------------------- arguments
@dataclass(frozen=True)
class HFPreset:
    path: str
    name: str | None = None
    data_dir: str | None = None
    data_files: tuple[tuple[str, str], ...] | None = None  # ((split, pattern), ...)
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("test", "test"))  # ((ours, hub), ...)
    help: str = ""


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {n}")
    return n


def add_empty_args(g) -> None:
    """``--fail-on-empty`` / ``--no-fail-on-empty`` (default on)."""
    g.add_argument(
        "--fail-on-empty",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an output with no rows (empty input, every row skipped) is an error, exit status 2 "
        "(default); --no-fail-on-empty writes the empty file",
    )


def add_common_args(
    p: argparse.ArgumentParser,
    *,
    default_max_len: int,
    text_fields: Sequence[str],
    presets: Mapping[str, HFPreset],
    default_preset: str | None,
) -> None:
    g = p.add_argument_group("inputs and outputs")
    g.add_argument("--out", required=True, metavar="DIR", help="output folder (file names: see data_prep/README.md)")
    g.add_argument(
        "--train",
        nargs="+",
        metavar="FILE",
        help="local input file(s) for the train split (.jsonl[.gz], .json, .parquet)",
    )
    g.add_argument("--test", nargs="+", metavar="FILE", help="local input file(s) for the test split")
    names = ", ".join(f"{k} ({v.help or v.path})" for k, v in presets.items())
    g.add_argument(
        "--hf",
        nargs="?",
        const=default_preset,
        default=None,
        choices=sorted(presets),
        help=f"read from the Hugging Face hub instead (default when no --train/--test): {names}",
    )
    g.add_argument("--hf-path", help="override the hub dataset id of the preset")
    g.add_argument("--hf-name", help="override the hub config name")
    g.add_argument("--hf-data-dir", help="override the hub data_dir")
    g.add_argument("--limit", type=positive_int, default=None, help="read at most N rows per split (quick runs)")
    g.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON")
    add_empty_args(g)
    g.add_argument(
        "--no-progress", action="store_true", help="no progress bars (they are only shown when stderr is a terminal)"
    )

    g = p.add_argument_group("rows")
    g.add_argument(
        "--on-bad-row",
        choices=("error", "skip"),
        default="error",
        help="malformed row: stop with row number and field (error, default) or count and drop it (skip)",
    )
    g.add_argument("--seed", type=int, default=0, help="seed for every random choice (default 0)")
    g.add_argument(
        "--exclude",
        nargs="+",
        metavar="FILE",
        default=None,
        help="drop rows whose normalized query text appears in any of these files (contamination removal)",
    )
    g.add_argument("--data-source", default=None, help="override the data_source column")
    g.add_argument("--prompt-version", default="v1", help="prompt template version (default v1)")

    g = p.add_argument_group("prompt length (measured like verl's RLHFDataset)")
    g.add_argument(
        "--max-prompt-length",
        type=int,
        default=default_max_len,
        help=f"tokens of the chat-formatted prompt (default {default_max_len}; 0 = no limit); "
        "set it to the recipe's data.max_prompt_length",
    )
    g.add_argument(
        "--tokenizer",
        default=None,
        help="policy tokenizer folder (default: $VERL_JUDGE_MODEL, else the materialised SmolLM2-135M-Instruct)",
    )
    g.add_argument(
        "--chat-template-kwargs",
        default="{}",
        metavar="JSON",
        help="extra apply_chat_template kwargs, as data.apply_chat_template_kwargs (default {})",
    )
    g.add_argument(
        "--truncate-field",
        nargs="*",
        default=None,
        choices=list(text_fields),
        metavar="FIELD",
        help="instead of dropping an over-long row, shorten the longest of these free-text fields in "
        f"the middle (marker {TRUNCATION_MARKER.strip()!r}); no FIELD = any of: {', '.join(text_fields)}",
    )


def load_template(name: str, version: str):
    """``reward_fns.prompts.load``; an unknown template/version is a DataError listing the available ones."""
    from reward_fns.prompts import load

    try:
        return load(name, version)
    except FileNotFoundError as e:
        raise DataError(f"--prompt-version {version}: {e}") from None


def make_gate(args) -> LengthGate:
    try:
        kwargs = json.loads(args.chat_template_kwargs)
    except json.JSONDecodeError as e:
        raise DataError(f"--chat-template-kwargs is not JSON: {e}") from e
    if not isinstance(kwargs, dict):
        raise DataError("--chat-template-kwargs must be a JSON object")
    max_len = args.max_prompt_length if args.max_prompt_length and args.max_prompt_length > 0 else None
    tok = None
    if max_len is not None:
        path = args.tokenizer or default_tokenizer_path()
        try:
            tok = load_tokenizer(path)
        except Exception as e:  # noqa: BLE001 - transformers raises many types for an unusable folder
            what = "" if os.path.isdir(path) else "no such folder, and not a usable hub id: "
            raise DataError(f"--tokenizer {path}: cannot load a tokenizer: {what}{type(e).__name__}: {e}") from None
    truncate = None if args.truncate_field is None else tuple(args.truncate_field)
    return LengthGate(tok, max_len, truncate, kwargs)


def check_outputs(args, files: Sequence[str] = ()) -> None:
    """Before any work: ``--out`` can hold files, each of ``files`` (names in it) and ``--summary-json`` can be
    written."""
    check_output_folder(args.out, "--out")
    for name in files:
        check_output_file(os.path.join(args.out, name))
    if getattr(args, "summary_json", None):
        check_output_file(args.summary_json, "--summary-json")


def resolve_sources(args, presets: Mapping[str, HFPreset], default_preset: str | None) -> list[tuple[str, Source]]:
    """``[(split, Source)]`` from ``--train``/``--test`` or, with none of them, the hub preset.

    The run's outputs are checked first (``check_outputs``: ``--out``, ``--summary-json``), and local
    inputs when their sources are created, so a bad path fails before any work.
    """
    check_outputs(args)
    if (args.train or args.test) and args.hf:
        raise DataError("give either local files (--train/--test) or --hf, not both")
    out = []
    shared = sorted({os.path.realpath(f) for f in args.train or []} & {os.path.realpath(f) for f in args.test or []})
    if shared:
        print(
            f"warning: --train and --test share {', '.join(shared)}: validation on it measures what was trained on "
            "(give a held-out file as --test)",
            file=sys.stderr,
        )
    if args.train or args.test:
        for split in ("train", "test"):
            paths = getattr(args, split)
            if paths:
                out.append((split, local_source(paths, args.limit)))
        return out
    preset_name = args.hf or default_preset
    if preset_name is None:
        raise DataError("no input: give --train/--test files or --hf PRESET")
    pre = presets[preset_name]
    data_files = dict(pre.data_files) if pre.data_files else None
    for ours, hub in pre.splits:
        out.append(
            (
                ours,
                hf_source(
                    args.hf_path or pre.path,
                    hub,
                    name=args.hf_name or pre.name,
                    data_dir=args.hf_data_dir or pre.data_dir,
                    data_files=data_files,
                    limit=args.limit,
                ),
            )
        )
    return out


def fixed_format(args, preset_format: Mapping[str, str], default_preset: str) -> str | None:
    """``--format`` if given, the hub preset's format, or None: detect it from each split's first row."""
    if args.format != "auto":
        return args.format
    if not (args.train or args.test):
        return preset_format[args.hf or default_preset]
    return None


# ----------------------------------------------------------------------------- summaries, errors
def check_not_empty(prog: str, stats: Stats, args) -> None:
    """DataError for an output without rows, unless ``--no-fail-on-empty``."""
    if stats.written == 0 and getattr(args, "fail_on_empty", True):
        raise DataError(
            f"{prog}: {stats.output or stats.split}: no rows to write: {describe_empty(stats)} "
            "(--no-fail-on-empty writes an empty file)"
        )


def finish(prog: str, all_stats: list[Stats], args) -> dict:
    """Check no output is empty (``--fail-on-empty``), print every summary (stdout), write ``--summary-json``."""
    for s in all_stats:
        check_not_empty(prog, s, args)
    for s in all_stats:
        print(format_summary(prog, s), flush=True)
    summary = {"program": prog, "seed": args.seed, "outputs": [s.as_dict() for s in all_stats]}
    if getattr(args, "summary_json", None):
        write_json(args.summary_json, summary, sort_keys=True)
    return summary


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def cli(
    run: Callable[[list[str] | None], object],
    argv: list[str] | None = None,
    status: Callable[[object], int] | None = None,
) -> int:
    """Run ``run(argv)`` as one output set; exit status ``status(result)`` (default 0).

    A DataError or an operating-system error becomes one line ``error: ...`` on stderr and exit status 2;
    Ctrl-C exit status 130. Either way no output of the run is written.
    """
    try:
        with output_set():
            result = run(argv)
    except DataError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"error: {where}{one_line(e.strerror or e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; no output written", file=sys.stderr)
        return 130
    return status(result) if status is not None else 0


# ----------------------------------------------------------------------------- the per-split loop
@dataclass
class SplitRun:
    """One split in progress: its name, source, stats, and the input format (detected from its first row)."""

    split: str
    source: Source
    stats: Stats
    fmt: str | None = None


def all_drafts(_run: SplitRun, accepted: list) -> list[tuple[Draft, tuple[str, ...]]]:
    """Every draft of every accepted unit, in order."""
    return [(d, names) for _u, ds, names in accepted for d in ds]


@dataclass
class Conversion:
    """A converter, as the shared loop (``run_conversion``) needs it.

    ``to_units(run, row, n)``: the units of input row number ``n`` (BadRow / SkipRow as usual);
    ``build(unit, fields)``: its drafts; ``select(run, accepted)``: the ``(draft, truncated fields)`` to
    write (default: all); ``data_source(run)``: the column value. ``fmt``: a fixed input format, or None
    to detect it per split with ``detect(row)``. ``count_labels``: count ground truths in the summary.
    """

    prog: str
    schema: pa.Schema
    ability: str
    to_units: Callable[[SplitRun, Mapping, int], list[Unit]]
    build: Builder
    data_source: Callable[[SplitRun], str]
    select: Callable[[SplitRun, list], list] = all_drafts
    fmt: str | None = None
    detect: Callable[[Mapping], str] | None = None
    count_labels: bool = True


def run_conversion(conv: Conversion, args, presets: Mapping[str, HFPreset], default_preset: str | None) -> dict:
    """The per-split loop: read -> units -> length gate -> rows -> parquet, then the summary; all or nothing."""
    progress = not args.no_progress
    with output_set():
        sources = resolve_sources(args, presets, default_preset)
        if not sources:
            raise DataError("no input splits")
        check_outputs(args, [f"{split}.parquet" for split, _ in sources])
        gate = make_gate(args)
        exclude = load_exclusion(args.exclude)
        all_stats = []
        for split, source in sources:
            run = SplitRun(split, source, Stats(split=split, source=source.name, max_len=gate.max_len), fmt=conv.fmt)

            def to_units(row, n, run=run):
                if run.fmt is None and conv.detect is not None:
                    run.fmt = conv.detect(row)
                return conv.to_units(run, row, n)

            units = read_units(
                source, to_units, run.stats, on_bad_row=args.on_bad_row, progress=progress, exclude=exclude
            )
            run.stats.items = len(units)
            accepted = gate.apply(units, conv.build, run.stats, progress=progress)
            drafts = conv.select(run, accepted)
            if conv.count_labels:
                for d, _ in drafts:
                    run.stats.labels[d.ground_truth] += 1
            run.stats.written = len(drafts)
            check_not_empty(conv.prog, run.stats, args)
            rows = make_rows(
                drafts, split=split, data_source=conv.data_source(run), ability=conv.ability, schema=conv.schema
            )
            run.stats.path = os.path.join(args.out, f"{split}.parquet")
            write_parquet(rows, run.stats.path, conv.schema)
            all_stats.append(run.stats)
        return finish(conv.prog, all_stats, args)
