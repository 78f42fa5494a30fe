"""The docs point at things that exist and say what the code does: every ``python -m <module>`` command of a README
names a module that can be run (a file of this repository, or an installed package's), every relative Markdown link
resolves to a file or folder (and, with ``#anchor`` into a Markdown file, to one of its headings), a section quoted
by name (``README "Results"``) is a heading of the main README, and no recipe README says a judge reply that does
not parse falls back to the rule reward (it earns what a verdict of 0 earns: ``reward_fns/README_llm_judge.md``)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re

import pytest

import scripts

ROOT = scripts.ROOT
DOCS = sorted(
    os.path.relpath(f, ROOT)
    for pattern in ("README.md", "recipes/**/README.md", "data_prep/README.md", "reward_fns/*.md", "docs/*.md")
    for f in glob.glob(os.path.join(ROOT, pattern), recursive=True)
)
MODULE = re.compile(r"python3? -m ([A-Za-z_][\w.]*)(?![\w.<])")  # not a placeholder: data_prep.<name>
GPU_ONLY = {"vllm"}  # installed with the gpu profile only (scripts/setup_env.sh): not checked on CPU
QUOTED_SECTION = re.compile(r'README "([^"]+)"')
PARSE_FALLS_BACK = re.compile(
    r"(pars|unparseable)[^.]*(rule reward as\s+fallback|fall(s|back)?\s+(back\s+)?to the rule)"
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def runnable(module: str) -> bool:
    """Whether ``python -m module`` finds it: a module or package (with ``__main__``) of this repository, or, outside
    it, a module the installed packages provide."""
    if module.split(".")[0] in GPU_ONLY:
        return True
    rel = os.path.join(ROOT, *module.split("."))
    if os.path.isdir(os.path.join(ROOT, module.split(".")[0])):
        return os.path.isfile(rel + ".py") or os.path.isfile(os.path.join(rel, "__main__.py"))
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md_file: str) -> set[str]:
    text = FENCE.sub("", open(md_file, encoding="utf-8").read())
    return {slug(h) for h in re.findall(r"^#+\s+(.*?)\s*#*$", text, re.M)}


def test_the_docs_are_found():
    assert {"README.md", "recipes/README.md", "data_prep/README.md", "reward_fns/README_llm_judge.md"} <= set(DOCS)


@pytest.mark.parametrize("doc", DOCS)
def test_python_m_commands_name_modules_that_exist(doc):
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    missing = sorted({m.rstrip(".") for m in MODULE.findall(text) if not runnable(m.rstrip("."))})
    assert missing == []


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    path = os.path.join(ROOT, doc)
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(where):
            broken.append(target)
        elif anchor and where.endswith(".md") and anchor.lower() not in anchors(where):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS)
def test_quoted_readme_sections_exist(doc):
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    headings = anchors(os.path.join(ROOT, "README.md"))
    assert [s for s in QUOTED_SECTION.findall(text) if slug(s) not in headings] == []


@pytest.mark.parametrize("doc", [d for d in DOCS if d.startswith("recipes/")])
def test_no_recipe_readme_says_a_parse_failure_gets_the_rule_reward(doc):
    text = " ".join(open(os.path.join(ROOT, doc), encoding="utf-8").read().split())
    assert [m.group(0) for m in PARSE_FALLS_BACK.finditer(text)] == []


MULTI_GPU_RUN = re.compile(r"bash recipes/(\w+)/run\.sh((?:\\\n|[^\n])*?trainer\.n_gpus_per_node=\d+(?:\\\n|[^\n])*)")


def multi_gpu_commands() -> list[tuple[str, str, list[str]]]:
    """Every documented ``bash recipes/<r>/run.sh ... trainer.n_gpus_per_node=N ...`` of a fenced block: (doc,
    recipe, its Hydra overrides, backslash continuations joined)."""
    found = []
    for doc in DOCS:
        for block in FENCE.findall(open(os.path.join(ROOT, doc), encoding="utf-8").read()):
            for recipe, rest in MULTI_GPU_RUN.findall(block):
                found.append((doc, recipe, [t for t in rest.replace("\\\n", " ").split() if "=" in t]))
    return found


def test_documented_multi_gpu_commands_pass_the_batch_check(monkeypatch):
    """A user copies the README's Ray cluster command: the batch it sets divides over the GPUs it names (the
    recipe's own batch over 16 GPUs did not, and the config check refused the README's command)."""
    from scripts.launch import verl_config

    for var in ("MODEL", "TRAIN_FILES", "VAL_FILES"):  # the commands set these; paths are not checked here
        monkeypatch.setenv(var, f"/shared/{var.lower()}")
    commands = multi_gpu_commands()
    assert {(doc, recipe) for doc, recipe, _ in commands} >= {
        ("README.md", "judge_pairwise"),
        ("docs/ray_cluster.md", "gsm8k_local_judge"),
    }
    for doc, recipe, overrides in commands:
        verl_config.check(overrides, paths="off", recipe=recipe)  # raises ConfigError naming the problem
