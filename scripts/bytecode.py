"""Are the training stack's modules byte-compiled? Start-up time depends on it.

With ``PYTHONDONTWRITEBYTECODE`` set (many container images do) and packages installed without bytecode, every
process of a verl run (about ten: Ray, FSDP and vLLM workers) compiles vLLM, torch and transformers from source, every
time (measured: ``docs/results/2026-11-23-main-bytecode``).

    python -m scripts.bytecode             # report; exit 1 when the cost applies
                                           # (the flag is set and bytecode is missing)
    python -m scripts.bytecode --compile   # byte-compile the install folders of those packages, all cores

``scripts.workflows.pipeline`` and ``scripts.launch`` print :func:`warning` before they start training.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import sys
import time

# what a verl + vLLM run imports in every process (the biggest first)
PACKAGES = ("torch", "vllm", "transformers", "ray", "verl", "datasets")


def uncompiled(packages=PACKAGES) -> list[tuple[str, str]]:
    """``(package, install folder)`` for each importable package whose ``__init__`` has no cached bytecode for this
    interpreter. Nothing is imported."""
    out = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None)
        if not origin or not origin.endswith(".py"):
            continue  # not installed, or a namespace / extension package: nothing to check
        if not os.path.exists(importlib.util.cache_from_source(origin)):
            out.append((name, os.path.dirname(os.path.dirname(origin))))
    return out


def dont_write_bytecode(env=None) -> bool:
    """True when this interpreter, or the processes it starts with ``env``, will not write bytecode."""
    env = os.environ if env is None else env
    return bool(sys.flags.dont_write_bytecode or env.get("PYTHONDONTWRITEBYTECODE"))


def warning(env=None, packages=PACKAGES) -> str | None:
    """One line for the user when start-up will compile from source, else None."""
    if not dont_write_bytecode(env):
        return None  # Python caches bytecode itself on the first import
    missing = uncompiled(packages)
    if not missing:
        return None
    return (
        f"PYTHONDONTWRITEBYTECODE is set and these packages have no bytecode: {', '.join(n for n, _ in missing)}; "
        f"every process compiles them from source at start (measured: ~11 s more per process). "
        f"Compile once: {os.path.basename(sys.executable)} -m scripts.bytecode --compile"
    )


def compile_folders(folders: list[str], workers: int = 0) -> bool:
    """Byte-compile each folder (``python -m compileall -q -j workers``); True when every file compiled."""
    ok = True
    for i, folder in enumerate(folders, 1):
        t0, step = time.time(), f"[bytecode] {i}/{len(folders)}"
        print(f"{step} compiling {folder} ...", flush=True)
        if not os.access(folder, os.W_OK):
            why = "run as its owner, or reinstall with pip, which compiles by default"
            print(f"[bytecode] ERROR: {folder} is not writable ({why})", file=sys.stderr)
            ok = False
            continue
        done = compileall.compile_dir(folder, quiet=1, workers=workers)
        ok = ok and bool(done)
        outcome = "done" if done else "some files did not compile"
        print(f"{step} {folder}: {outcome} in {time.time() - t0:.0f}s", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m scripts.bytecode", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    compiles = "the install folders of the packages that lack bytecode (their whole site-packages folder: their "
    p.add_argument("--compile", action="store_true", help=f"byte-compile {compiles}dependencies are imported too)")
    packages_help = f"packages to check (default: {' '.join(PACKAGES)})"
    p.add_argument("--packages", nargs="+", default=list(PACKAGES), metavar="NAME", help=packages_help)
    p.add_argument("-j", "--workers", type=int, default=0, help="compile processes (default 0: one per core)")
    a = p.parse_args(argv)
    missing = uncompiled(a.packages)
    flag = dont_write_bytecode()
    print(
        f"[bytecode] {sys.executable}: PYTHONDONTWRITEBYTECODE {'set' if flag else 'not set'}; "
        f"without bytecode: {', '.join(n for n, _ in missing) or 'none'}"
    )
    if a.compile:
        folders = sorted({f for _, f in missing})
        if not folders:
            print("[bytecode] nothing to compile")
            return 0
        if not compile_folders(folders, a.workers):
            print(
                "[bytecode] note: some files did not compile (compileall printed them); "
                "modules that do import are cached"
            )
        left = uncompiled(a.packages)
        print(f"[bytecode] without bytecode now: {', '.join(n for n, _ in left) or 'none'}")
        return 1 if left else 0
    return 1 if flag and missing else 0


if __name__ == "__main__":
    sys.exit(main())
