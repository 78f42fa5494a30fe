"""Writing outputs atomically: every file of one run appears together or not at all.

Every writer here fills a hidden temporary file in the destination folder. Inside ``output_set()`` all of them are
renamed into place together when the block ends without an error (replaced files are put back if a rename fails); on
any error or Ctrl-C the temporary files and the folders the run created are removed and earlier outputs stay. Outside
a block a write is one atomic file (temporary file + ``os.replace``). Parquet is written with an explicit schema and
fixed options, so the same inputs and seed give byte-identical files. ``check_output_file`` / ``check_output_folder``
fail early with a ``DataError`` naming a path that cannot be written.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

from data_prep.files.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa

PARQUET_OPTIONS = dict(
    compression="zstd",
    compression_level=3,
    use_dictionary=True,
    write_statistics=True,
    row_group_size=4096,
    data_page_size=1 << 20,
    version="2.6",
    data_page_version="1.0",
)


# ----------------------------------------------------------------------------- path checks
def _nearest_existing(folder: str) -> str:
    while not os.path.lexists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def check_output_folder(folder: str, what: str = "--out") -> None:
    """DataError unless ``folder`` is a folder or can be created (nothing is created here)."""
    path = os.path.abspath(folder)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise DataError(f"{what} {folder}: exists and is not a folder")
    base = _nearest_existing(path)
    if not os.path.isdir(base):
        raise DataError(f"{what} {folder}: cannot create the folder: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise DataError(f"{what} {folder}: cannot write in {base} (permission denied)")


def check_output_file(path: str, what: str = "output") -> None:
    """DataError unless the file ``path`` can be written (it is not a folder; its folder exists or can be made)."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise DataError(f"{what} {path}: is a folder, not a file")
    check_output_folder(os.path.dirname(full), f"{what} {path}: folder")


# ----------------------------------------------------------------------------- the output set
class OutputSet:
    """Files staged beside their destinations, renamed into place together by ``commit``."""

    def __init__(self) -> None:
        self._staged: dict[str, str] = {}  # destination -> temporary file
        self._created: list[str] = []  # folders this set created

    def stage(self, path: str) -> str:
        """A temporary path in ``path``'s folder (created if needed) to write ``path``'s content to."""
        dest = os.path.abspath(path)
        check_output_file(path)
        folder = os.path.dirname(dest)
        tmp = os.path.join(folder, f".{os.path.basename(dest)}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        base = _nearest_existing(folder)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise DataError(f"{path}: cannot create folder {folder}: {e.strerror or e}") from None
        while folder != base:  # the folders made here
            self._created.append(folder)
            folder = os.path.dirname(folder)
        _remove(self._staged.pop(dest, ""))  # a file staged before for ``path`` ("": none, or dropped)
        self._staged[dest] = tmp
        return tmp

    def drop(self, path: str) -> None:
        """Remove ``path`` (if it is there) when the set commits: a file an earlier run of the same output set wrote
        that this run does not (a split asked with size 0), so the set is replaced whole."""
        dest = os.path.abspath(path)
        _remove(self._staged.pop(dest, ""))
        if os.path.lexists(dest):
            self._staged[dest] = ""

    def commit(self) -> None:
        """Rename every staged file into place; on a failure put back what was there and raise DataError."""
        done: list[tuple[str, str | None]] = []  # (destination, kept-aside old file)
        try:
            for dest, tmp in self._staged.items():
                if os.path.isdir(dest):
                    raise DataError(f"{dest}: is a folder, not a file")
                aside = None
                if os.path.lexists(dest):
                    aside = f"{tmp or os.path.join(os.path.dirname(dest), '.' + os.path.basename(dest))}.old"
                    try:
                        os.link(dest, aside)
                    except OSError:
                        shutil.copy2(dest, aside)
                try:
                    if tmp:
                        os.replace(tmp, dest)
                    else:  # dropped
                        os.remove(dest)
                except OSError as e:
                    if aside is not None:
                        _remove(aside)
                    raise DataError(f"{dest}: cannot write: {e.strerror or e}") from None
                done.append((dest, aside))
        except BaseException:
            for dest, aside in reversed(done):
                if aside is not None:
                    os.replace(aside, dest)
                else:
                    _remove(dest)
            self.abort()
            raise
        for _dest, aside in done:
            if aside is not None:
                _remove(aside)
        self._staged.clear()
        self._created.clear()

    def abort(self) -> None:
        """Remove every staged file and the folders this set created (when empty)."""
        for tmp in self._staged.values():
            if tmp:
                _remove(tmp)
        self._staged.clear()
        for folder in sorted(self._created, key=len, reverse=True):  # inner folders first
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        self._created.clear()


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # os.remove("") too
        os.remove(path)


_ACTIVE: contextvars.ContextVar[OutputSet | None] = contextvars.ContextVar("data_prep_output_set", default=None)


@contextlib.contextmanager
def output_set() -> Iterator[OutputSet]:
    """All writes inside the block are committed together at its end, or none (see the module docstring).

    Nested blocks join the outermost one.
    """
    current = _ACTIVE.get()
    if current is not None:
        yield current
        return
    outs = OutputSet()
    token = _ACTIVE.set(outs)
    try:
        yield outs
    except BaseException:
        outs.abort()
        raise
    else:
        outs.commit()
    finally:
        _ACTIVE.reset(token)


def write_file(path: str, write: Callable[[IO], None], *, binary: bool = False) -> None:
    """``write(f)`` fills a staged temporary file (text: UTF-8) that takes ``path``'s place atomically.

    An ``OSError`` becomes a ``DataError`` naming ``path``; any error leaves ``path`` as it was."""
    with output_set() as outs:
        tmp = outs.stage(path)
        try:
            with open(tmp, "xb") if binary else open(tmp, "x", encoding="utf-8") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise DataError(f"{path}: cannot write: {e.strerror or e}") from None


def write_parquet(rows: list[dict], path: str, schema: pa.Schema) -> None:
    """Deterministic parquet (fixed options, no varying metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=schema)
    write_file(path, lambda f: pq.write_table(table, f, **PARQUET_OPTIONS), binary=True)


def write_json(path: str, obj: Any, *, sort_keys: bool = False) -> None:
    """``obj`` as indented JSON plus a newline (non-ASCII kept; values JSON cannot hold written as ``str``)."""
    text = json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False, default=str) + "\n"
    write_file(path, lambda f: f.write(text))


def write_jsonl(path: str, rows: Iterable[Mapping]) -> None:
    """One JSON object per line (non-ASCII kept; values JSON cannot hold written as ``str``)."""
    write_file(path, lambda f: f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))


def write_text(path: str, text: str) -> None:
    """``text``, ending with a newline (one is added when it has none)."""
    write_file(path, lambda f: f.write(text if text.endswith("\n") else text + "\n"))
