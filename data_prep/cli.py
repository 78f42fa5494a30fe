"""What every converter CLI shares: arguments, input/output checks, the per-split loop, summaries, errors.

A converter describes itself as a ``Conversion`` and calls ``run_conversion``, the one per-split loop:

    check inputs and outputs -> per split: read rows -> units (bad rows, duplicates, conflicting labels,
    --exclude) -> length gate -> drafts -> verl rows -> parquet (``write_split``) -> summary (+ --summary-json)

The whole run is one ``output_set``: every output is renamed into place at the end, or, on any error, none. ``cli``
turns a ``DataError`` (or an operating-system error) into one ``error: ...`` line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa

from data_prep.files.errors import BadRow, DataError
from data_prep.files.outputs import check_output_file, check_output_folder, output_set, write_json, write_parquet
from data_prep.files.readers import Source, hf_source, local_source
from data_prep.lengths import TRUNCATION_MARKER, LengthGate, default_tokenizer_path, load_tokenizer
from data_prep.rows import Builder, Draft, Unit, load_exclusion, make_rows, read_units
from data_prep.summary import Stats, describe_empty, format_summary

T = TypeVar("T")


# ----------------------------------------------------------------------------- arguments
@dataclass(frozen=True)
class HFPreset:
    path: str
    name: str | None = None
    data_dir: str | None = None
    data_files: tuple[tuple[str, str], ...] | None = None  # ((split, pattern), ...)
    splits: tuple[tuple[str, str], ...] = (("train", "train"), ("test", "test"))  # ((ours, hub), ...)
    help: str = ""
    format: str | None = None  # the input schema, for converters with --format


def from_args(cls: type[T], args: argparse.Namespace, prefix: str = "", **given: Any) -> T:
    """The dataclass ``cls`` of parsed flags: each field from ``args.<prefix><field>`` (a field the command line has
    no flag for keeps its default) unless ``given``; the one settings builder of data prep, the evaluators and the
    benches."""
    names = [f.name for f in fields(cls) if f.name not in given and hasattr(args, prefix + f.name)]
    return cls(**{name: getattr(args, prefix + name) for name in names}, **given)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {n}")
    return n


def new_parser(prog: str, doc: str | None, **kwargs) -> argparse.ArgumentParser:
    """The parser of ``python -m <prog>`` (the data prep converters', the evaluators' and the reports'); ``--help``
    shows the module docstring ``doc`` as written; ``kwargs``: argparse's (``epilog``)."""
    return argparse.ArgumentParser(
        prog=f"python -m {prog}", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )


def add_run_flags(g) -> None:
    """``--fail-on-empty`` / ``--no-fail-on-empty`` (default on) and ``--no-progress``."""
    empty_help = "an output with no rows is an error, exit status 2 (default); --no-fail-on-empty writes the empty file"
    g.add_argument("--fail-on-empty", action=argparse.BooleanOptionalAction, default=True, help=empty_help)
    g.add_argument("--no-progress", action="store_true", help="no progress bars (shown only when stderr is a terminal)")


def add_common_args(
    p: argparse.ArgumentParser,
    *,
    default_max_len: int,
    text_fields: Sequence[str],
    presets: Mapping[str, HFPreset],
    formats: Sequence[str] = (),
) -> None:
    """Every converter's arguments, in three groups: inputs and outputs, rows, prompt length; ``--format`` (choices
    ``formats``) when given. The first of ``presets`` is the default hub dataset."""
    g = p.add_argument_group("inputs and outputs")
    g.add_argument("--out", required=True, metavar="DIR", help="output folder (file names: see data_prep/README.md)")
    train_help = "local input file(s) for the train split (.jsonl[.gz], .json, .parquet)"
    g.add_argument("--train", nargs="+", metavar="FILE", help=train_help)
    g.add_argument("--test", nargs="+", metavar="FILE", help="local input file(s) for the test split")
    names = ", ".join(f"{k} ({v.help or v.path})" for k, v in presets.items())
    hf_help = f"read from the Hugging Face hub instead (default when no --train/--test): {names}"
    g.add_argument("--hf", nargs="?", const=next(iter(presets)), default=None, choices=sorted(presets), help=hf_help)
    g.add_argument("--hf-path", help="override the hub dataset id of the preset")
    g.add_argument("--hf-name", help="override the hub config name")
    g.add_argument("--hf-data-dir", help="override the hub data_dir")
    g.add_argument("--limit", type=positive_int, default=None, help="read at most N rows per split (quick runs)")
    g.add_argument("--summary-json", metavar="FILE", help="also write the summary as JSON")
    add_run_flags(g)

    g = p.add_argument_group("rows")
    bad_help = "malformed row: stop with row number and field (error, default) or count and drop it (skip)"
    g.add_argument("--on-bad-row", choices=("error", "skip"), default="error", help=bad_help)
    g.add_argument("--seed", type=int, default=0, help="seed for every random choice (default 0)")
    exclude_help = "drop rows whose normalized query text appears in any of these files (contamination removal)"
    g.add_argument("--exclude", nargs="+", metavar="FILE", default=None, help=exclude_help)
    g.add_argument("--data-source", default=None, help="override the data_source column")
    g.add_argument("--prompt-version", default="v1", help="prompt template version (default v1)")

    g = p.add_argument_group("prompt length (measured like verl's RLHFDataset)")
    length_help = f"tokens of the chat-formatted prompt (default {default_max_len}; 0 = no limit); "
    length_help += "set it to the recipe's data.max_prompt_length"
    g.add_argument("--max-prompt-length", type=int, default=default_max_len, help=length_help)
    tokenizer_help = "policy tokenizer folder or hub id (default: $MODEL, the recipes' model; else $VERL_JUDGE_MODEL, "
    tokenizer_help += "else the materialised SmolLM2-135M-Instruct)"
    g.add_argument("--tokenizer", default=None, help=tokenizer_help)
    kwargs_help = "extra apply_chat_template kwargs, as data.apply_chat_template_kwargs (default {})"
    g.add_argument("--chat-template-kwargs", default="{}", metavar="JSON", help=kwargs_help)
    truncate_help = "instead of dropping an over-long row, shorten the longest of these free-text fields in the "
    truncate_help += f"middle (marker {TRUNCATION_MARKER.strip()!r}); no FIELD = any of: {', '.join(text_fields)}"
    g.add_argument(
        "--truncate-field", nargs="*", default=None, choices=list(text_fields), metavar="FIELD", help=truncate_help
    )
    if formats:
        format_help = "input schema (default: auto-detect from the first row)"
        p.add_argument("--format", choices=("auto", *formats), default="auto", help=format_help)


@dataclass(frozen=True, kw_only=True)
class Options:
    """A converter's command line, parsed once by ``Options.parse``. A converter with flags of its own
    subclasses it; ``parse`` fills every field a subclass adds from the flag of the same name."""

    out: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    hf: str | None  # --hf as given
    hub: HFPreset | None  # the hub dataset read (preset + --hf-path/--hf-name/--hf-data-dir); None: local files
    limit: int | None
    summary_json: str | None
    fail_on_empty: bool
    progress: bool  # not --no-progress
    on_bad_row: str
    seed: int
    exclude: tuple[str, ...] | None
    data_source: str | None
    prompt_version: str
    max_len: int | None  # --max-prompt-length; None: no limit
    tokenizer: str | None
    chat_template_kwargs: str  # JSON, checked by make_gate
    truncate: tuple[str, ...] | None  # --truncate-field: None = drop over-long rows; () = any text field
    fmt: str | None = None  # --format, else the hub preset's format; None: detect it from each split's first row

    @classmethod
    def parse(
        cls,
        parser: argparse.ArgumentParser,
        argv: list[str] | None,
        presets: Mapping[str, HFPreset],
    ):
        """``parser``'s reading of ``argv`` (lists as tuples) with the derived values resolved."""
        given = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(parser.parse_args(argv)).items()}
        pre, hub = presets[given["hf"] or next(iter(presets))], None
        if not (given["train"] or given["test"]):  # --hf-path / --hf-name / --hf-data-dir override the preset's
            hub = replace(pre, **{k: given[f"hf_{k}"] or getattr(pre, k) for k in ("path", "name", "data_dir")})
        fmt = given.get("format", "auto")
        derived = {
            "train": given["train"] or (),
            "test": given["test"] or (),
            "hub": hub,
            "progress": not given["no_progress"],
            "max_len": given["max_prompt_length"] if given["max_prompt_length"] > 0 else None,
            "truncate": given["truncate_field"],
            "fmt": fmt if fmt != "auto" else hub and hub.format,
        }
        return from_args(cls, argparse.Namespace(**given), **derived)

    def template(self, name: str):
        """Prompt template ``name`` at ``--prompt-version``."""
        return load_template(name, self.prompt_version, f"--prompt-version {self.prompt_version}")


def load_template(name: str, version: str, what: str):
    """``reward_fns.prompts.load``; an unknown template/version is a DataError (``what: ...``) listing the available
    ones."""
    from reward_fns.prompts import load

    try:
        return load(name, version)
    except FileNotFoundError as e:
        raise DataError(f"{what}: {e}") from None


def make_gate(options: Options) -> LengthGate:
    try:
        kwargs = json.loads(options.chat_template_kwargs)
    except json.JSONDecodeError as e:
        raise DataError(f"--chat-template-kwargs is not JSON: {e}") from e
    if not isinstance(kwargs, dict):
        raise DataError("--chat-template-kwargs must be a JSON object")
    tok = None
    if options.max_len is not None:
        path = options.tokenizer or default_tokenizer_path()
        try:
            tok = load_tokenizer(path)
        except Exception as e:  # noqa: BLE001 - transformers raises many types for an unusable folder
            what = "" if os.path.isdir(path) else "no such folder, and not a usable hub id: "
            raise DataError(f"--tokenizer {path}: cannot load a tokenizer: {what}{type(e).__name__}: {e}") from None
    return LengthGate(tok, options.max_len, options.truncate, kwargs)


def resolve_sources(options: Options) -> list[tuple[str, Source]]:
    """``[(split, Source)]`` from ``--train``/``--test`` or, with none of them, the hub preset.

    The run's outputs are checked first (``--out`` can hold files, ``--summary-json`` can be written), and local
    inputs when their sources are created, so a bad path fails before any work.
    """
    check_output_folder(options.out, "--out")
    if options.summary_json:
        check_output_file(options.summary_json, "--summary-json")
    if options.hub is None and options.hf:
        raise DataError("give either local files (--train/--test) or --hf, not both")
    shared = sorted({os.path.realpath(f) for f in options.train} & {os.path.realpath(f) for f in options.test})
    if shared:
        print(
            f"warning: --train and --test share {', '.join(shared)}: validation on it measures what was trained on "
            "(give a held-out file as --test)",
            file=sys.stderr,
        )
    hub = options.hub
    if hub is None:
        local = (("train", options.train), ("test", options.test))
        return [(split, local_source(paths, options.limit)) for split, paths in local if paths]
    files = dict(hub.data_files) if hub.data_files else None
    return [
        (ours, hf_source(hub.path, theirs, name=hub.name, data_dir=hub.data_dir, data_files=files, limit=options.limit))
        for ours, theirs in hub.splits
    ]


# ----------------------------------------------------------------------------- summaries, errors
def finish(prog: str, all_stats: list[Stats], options: Options) -> dict:
    """Print every summary (stdout), write ``--summary-json``."""
    for s in all_stats:
        print(format_summary(prog, s), flush=True)
    summary = {"program": prog, "seed": options.seed, "outputs": [s.as_dict() for s in all_stats]}
    if options.summary_json:
        write_json(options.summary_json, summary, sort_keys=True)
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
    """One output in progress: its split, source, stats, and the input format (detected from its first row)."""

    split: str
    source: Source
    stats: Stats
    fmt: str | None = None

    def detect(self, row: Mapping, signatures: Mapping[str, set[str]]) -> str:
        """``fmt``: ``--format``, else the first of ``signatures`` (format -> keys) whose keys the split's first
        row has."""
        self.fmt = self.fmt or next((f for f, keys in signatures.items() if keys <= row.keys()), None)
        if self.fmt is None:
            why = f"cannot tell the input format from keys {sorted(row)}; pass --format"
            raise BadRow("<row>", why, reason="unknown_format")
        return self.fmt


def all_drafts(_run: SplitRun, accepted: list) -> list[tuple[Draft, tuple[str, ...]]]:
    """Every draft of every accepted unit, in order."""
    return [(d, names) for _u, ds, names in accepted for d in ds]


@dataclass(frozen=True, kw_only=True)
class Conversion:
    """A converter, as the shared loop (``run_conversion``, ``write_split``) needs it.

    ``to_units(run, row, n)``: the units of input row number ``n`` (BadRow / SkipRow as usual; None for a
    converter that reads its units itself); ``build(unit, fields)``: its drafts; ``select(run, accepted)``: the
    ``(draft, truncated fields)`` to write (default: all); ``data_source(run)``: the column value.
    ``count_labels``: count ground truths in the summary. ``outputs``: the prefixes of the files one split's read
    gives (``<prefix><split>.parquet``); ``write(run, units, gate)`` writes them all (default: ``write_split``).
    """

    prog: str
    schema: pa.Schema
    ability: str
    build: Builder
    data_source: Callable[[SplitRun], str]
    to_units: Callable[[SplitRun, Mapping, int], list[Unit]] | None = None
    select: Callable[[SplitRun, list], list] = all_drafts
    count_labels: bool = True
    outputs: tuple[str, ...] = ("",)
    write: Callable[[SplitRun, list[Unit], LengthGate], list[Stats]] | None = None


def write_split(conv: Conversion, run: SplitRun, units: list[Unit], gate: LengthGate, options: Options) -> Stats:
    """``units`` through the length gate -> drafts -> verl rows -> ``<out>/<output or split>.parquet``; the
    counts go to ``run.stats`` (an output without rows is an error unless ``--no-fail-on-empty``)."""
    stats = run.stats
    accepted = gate.apply(units, conv.build, stats, progress=options.progress)
    drafts = conv.select(run, accepted)
    if conv.count_labels:
        stats.labels.update(d.ground_truth for d, _ in drafts)
    stats.written = len(drafts)
    if stats.written == 0 and options.fail_on_empty:
        raise DataError(
            f"{conv.prog}: {stats.output or stats.split}: no rows to write: {describe_empty(stats)} "
            "(--no-fail-on-empty writes an empty file)"
        )
    rows = make_rows(
        drafts, split=run.split, data_source=conv.data_source(run), ability=conv.ability, schema=conv.schema
    )
    stats.path = os.path.join(options.out, f"{stats.output or run.split}.parquet")
    write_parquet(rows, stats.path, conv.schema)
    return stats


def run_conversion(conv: Conversion, options: Options) -> dict:
    """The per-split loop: read -> units -> length gate -> rows -> parquet, then the summary; all or nothing."""
    with output_set():
        sources = resolve_sources(options)
        for name in (f"{prefix}{split}.parquet" for split, _ in sources for prefix in conv.outputs):
            check_output_file(os.path.join(options.out, name))
        gate = make_gate(options)
        exclude = load_exclusion(options.exclude)
        reading = dict(on_bad_row=options.on_bad_row, progress=options.progress, exclude=exclude)
        all_stats = []
        for split, source in sources:
            stats = Stats(split=split, output=conv.outputs[0] + split, source=source.name, max_len=gate.max_len)
            run = SplitRun(split, source, stats, fmt=options.fmt)
            units = read_units(source, partial(conv.to_units, run), run.stats, **reading)
            run.stats.items = len(units)
            all_stats += conv.write(run, units, gate) if conv.write else [write_split(conv, run, units, gate, options)]
        return finish(conv.prog, all_stats, options)
