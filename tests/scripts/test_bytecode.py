"""scripts/bytecode.py: the start-up cost of packages without bytecode under PYTHONDONTWRITEBYTECODE, and its fix."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys

import pytest

import scripts
from scripts import bytecode
from scripts.launch import launcher as launch
from scripts.workflows import pipeline
from tests.scripts.launch.test_recipes import fx, recipe_files, sdpa_off  # noqa: F401  (fx: the module fixture)

ROOT = scripts.ROOT


@pytest.fixture
def site(tmp_path):
    """A site folder with two packages: vjbc_cached (its __init__ has bytecode) and vjbc_plain (none)."""
    for name in ("vjbc_cached", "vjbc_plain"):
        pkg = tmp_path / "site" / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("X = 1\n")
        (pkg / "mod.py").write_text("Y = 2\n")
    py_compile.compile(str(tmp_path / "site" / "vjbc_cached" / "__init__.py"))
    return tmp_path / "site"


def _py(site, env_flag: bool, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, str(site)])
    if env_flag:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


WARN = (
    f"PYTHONDONTWRITEBYTECODE is set and these packages have no bytecode: vjbc_plain; every process compiles "
    f"them from source at start (measured: ~11 s more per process). "
    f"Compile once: {os.path.basename(sys.executable)} -m "
    f"scripts.bytecode --compile"
)


@pytest.mark.parametrize(
    "flag, packages, expected",
    [
        (True, ("vjbc_plain", "vjbc_cached"), WARN),
        (True, ("vjbc_cached",), "None"),
        (True, ("vjbc_not_installed", "sys"), "None"),  # not importable / built in: nothing to check
        (False, ("vjbc_plain",), "None"),  # Python writes the bytecode itself on the first import
    ],
)
def test_warning(site, flag, packages, expected):
    code = f"from scripts import bytecode; print(bytecode.warning(packages={packages!r}))"
    r = _py(site, flag, "-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


def test_uncompiled_names_the_package_and_its_install_folder(site, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    assert bytecode.uncompiled(("vjbc_cached", "vjbc_plain", "vjbc_missing")) == [("vjbc_plain", str(site))]


@pytest.mark.parametrize(
    "env, flag", [({"PYTHONDONTWRITEBYTECODE": "1"}, True), ({}, bool(sys.flags.dont_write_bytecode))]
)
def test_dont_write_bytecode_reads_the_children_environment(env, flag):
    assert bytecode.dont_write_bytecode(env) is flag


def test_compile_cli_then_report(site):
    before = _py(site, True, "-m", "scripts.bytecode", "--packages", "vjbc_plain", "vjbc_cached")
    assert before.returncode == 1, before.stdout + before.stderr
    assert before.stdout.strip().endswith("PYTHONDONTWRITEBYTECODE set; without bytecode: vjbc_plain")
    r = _py(site, True, "-m", "scripts.bytecode", "--compile", "--packages", "vjbc_plain", "vjbc_cached", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[1] == f"[bytecode] 1/1 compiling {site} ..."
    assert lines[2].startswith(f"[bytecode] 1/1 {site}: done in ")
    assert lines[-1] == "[bytecode] without bytecode now: none"
    tag = sys.implementation.cache_tag
    assert sorted(os.listdir(site / "vjbc_plain" / "__pycache__")) == [f"__init__.{tag}.pyc", f"mod.{tag}.pyc"]
    after = _py(site, True, "-m", "scripts.bytecode", "--packages", "vjbc_plain")
    assert after.returncode == 0 and after.stdout.strip().endswith("without bytecode: none")
    again = _py(site, True, "-m", "scripts.bytecode", "--compile", "--packages", "vjbc_plain")
    assert again.returncode == 0 and again.stdout.strip().endswith("[bytecode] nothing to compile")


def test_help():
    r = subprocess.run([sys.executable, "-m", "scripts.bytecode", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "--compile" in r.stdout and "PYTHONDONTWRITEBYTECODE" in r.stdout


def test_a_folder_that_cannot_be_written_is_an_error(site, monkeypatch, capsys):
    monkeypatch.setattr(bytecode.os, "access", lambda path, mode: False)
    assert bytecode.compile_folders([str(site)]) is False
    err = capsys.readouterr().err
    assert f"[bytecode] ERROR: {site} is not writable" in err
    assert not (site / "vjbc_plain" / "__pycache__").exists()


def test_pipeline_prints_the_warning_before_any_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bytecode, "warning", lambda env=None: "SLOW START")
    monkeypatch.setattr(pipeline, "judge", lambda flow, args: "judge")
    assert pipeline.main(["judge", "--task", "pointwise", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[pipeline] WARNING: SLOW START"


def test_local_launch_prints_the_warning_before_training(fx, model_path, monkeypatch, capsys):  # noqa: F811
    ran = []
    monkeypatch.setattr(bytecode, "warning", lambda env=None: "SLOW START")
    monkeypatch.setattr(launch, "execute", lambda p, env: ran.append(p.mode) or 0)
    rc = launch.main(["gsm8k_rule"], sdpa_off(MODEL=model_path, **recipe_files(fx, "gsm8k_rule")))
    out = capsys.readouterr().out
    assert rc == 0 and ran == ["local"], out
    assert "WARNING: SLOW START" in out
    assert out.index("WARNING: SLOW START") > out.index("config OK")
