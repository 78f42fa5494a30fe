"""Progress bars: on stderr only when stderr is a terminal (tqdm); stdout is the same with and without them."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

import scripts

ROOT = scripts.ROOT
FIX = os.path.join(ROOT, "tests", "fixtures", "data_prep")


def _cli(module: str, out: str, model_path: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        f"data_prep.{module}",
        "--out",
        out,
        "--tokenizer",
        model_path,
        "--on-bad-row",
        "skip",
        "--train",
        os.path.join(FIX, "pairwise_generic.jsonl" if module == "pairwise" else "gsm8k.jsonl"),
    ]


def _run_with_tty_stderr(cmd: list[str]) -> tuple[int, str, str]:
    """Run ``cmd`` with stderr on a pseudo-terminal (stdout a pipe): (status, stdout, terminal output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # a real terminal has a width
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = p.stdout.read().decode()
    p.stdout.close()
    return p.wait(timeout=300), out, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("module,bar", [("gsm8k", "train: read"), ("pairwise", "train: length check")])
def test_progress_only_on_a_terminal(module, bar, tmp_path, model_path):
    piped = subprocess.run(
        _cli(module, str(tmp_path / "piped"), model_path), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert piped.returncode == 0
    assert piped.stderr == ""  # no bar, no carriage returns in logs
    rc, out, terminal = _run_with_tty_stderr(_cli(module, str(tmp_path / "tty"), model_path))
    assert rc == 0
    assert bar in terminal and "\r" in terminal
    assert out.replace(str(tmp_path / "tty"), "OUT") == piped.stdout.replace(str(tmp_path / "piped"), "OUT")
    assert "rows read" in out and bar not in out


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_and_its_row_count():
    from data_prep.progress import progress_bar

    counted = []
    term = FakeTerminal()
    bar = progress_bar(lambda: counted.append(1) or 5, "rows", True, stream=term)
    bar.update(5)
    bar.close()
    assert (type(bar).__name__, counted) == ("tqdm", [1])
    assert "rows:" in term.getvalue() and "0/5" in term.getvalue()


@pytest.mark.parametrize("enabled,stream_cls", [(False, FakeTerminal), (True, io.StringIO)])
def test_no_bar_and_no_row_count_when_off(enabled, stream_cls):
    from data_prep.progress import progress_bar

    counted = []
    stream = stream_cls()
    bar = progress_bar(lambda: counted.append(1) or 5, "rows", enabled, stream=stream)
    bar.update(3)
    bar.close()
    assert stream.getvalue() == "" and counted == []  # the (file-reading) row count is not even taken
