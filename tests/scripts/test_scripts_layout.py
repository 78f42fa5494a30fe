"""The layout of scripts/: no import cycle among its modules (the launch layer sits below the pipeline, the lab on
top), the packages run as ``python -m scripts.<group>.<name>`` with no ``sys.path`` edits, the lab behind a one-way
door (nothing outside scripts/lab imports it), one fake OpenAI server (a test double), nothing outside tests/ imports
tests/."""

from __future__ import annotations

import ast
import glob
import os

import pytest

import scripts
from tests.layout_helpers import imports

ROOT = scripts.ROOT
GROUPS = ("launch", "train", "workflows", "eval", "report", "serve", "lab", "lab/bench")
PACKAGE_FILES = sorted(f for g in GROUPS for f in glob.glob(os.path.join(ROOT, "scripts", g, "*.py")))
LAB = os.path.join(ROOT, "scripts", "lab")
OWN_FILES = (
    PACKAGE_FILES
    + [os.path.join(ROOT, "scripts", "materialize_model.py")]
    + sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "eval", "*.py")))
)
PRODUCT_FILES = sorted(
    f
    for d in ("scripts", "reward_fns", "data_prep")
    for f in glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True)
)
#: layers, lowest first: a module may import its own layer's and lower layers' modules only. The launcher and the
#: trainer are one layer in two folders: the launcher checks the trainer's hook settings, the trainer reads the knobs.
LAYERS = (
    ("reward_fns",),
    ("data_prep",),
    ("scripts.console", "scripts.bytecode"),
    ("scripts.eval", "scripts.report", "scripts.serve"),
    ("scripts.launch", "scripts.train"),
    ("scripts.workflows", "scripts.pipeline"),
    ("scripts.lab",),
)


def _rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def _tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def test_the_groups_hold_these_modules():
    group = lambda f: os.path.relpath(os.path.dirname(f), os.path.join(ROOT, "scripts"))  # noqa: E731
    assert {g: sorted(os.path.basename(f) for f in PACKAGE_FILES if group(f) == g) for g in GROUPS} == {
        "launch": [
            "__init__.py",
            "__main__.py",
            "config_checks.py",
            "config_compose.py",
            "config_paths.py",
            "defaults.py",
            "judge_server.py",
            "knobs.py",
            "launcher.py",
            "local_run.py",
            "overrides.py",
            "preflight.py",
            "ray_head.py",
            "ray_job.py",
            "services.py",
            "stall.py",
            "verl_config.py",
        ],
        "train": [
            "__init__.py",
            "__main__.py",
            "deferred_reward.py",
            "fast_logprobs.py",
            "group_reward.py",
            "hooks.py",
            "seam.py",
            "trainer.py",
            "watches.py",
        ],
        "workflows": [
            "__init__.py",
            "cli.py",
            "pipeline.py",
            "stages.py",
            "steps.py",
        ],
        "eval": [
            "__init__.py",
            "backends.py",
            "cli.py",
            "endpoint.py",
            "figures.py",
            "gsm8k.py",
            "gsm8k_data.py",
            "gsm8k_grading.py",
            "gsm8k_report.py",
            "judge.py",
            "offline.py",
            "predictions.py",
            "rows.py",
        ],
        "report": [
            "__init__.py",
            "compare_evals.py",
            "plot_metrics.py",
            "render.py",
            "summarize_run.py",
        ],
        "serve": ["__init__.py", "cpu_judge.py"],
        "lab": [
            "__init__.py",
            "arms.py",
            "disagreements.py",
            "instances.py",
            "ledger.py",
            "policy_learns.py",
            "report.py",
            "reuse.py",
            "scorecard.py",
            "scorecard_stats.py",
        ],
        "lab/bench": [
            "__init__.py",
            "__main__.py",
            "abstain.py",
            "children.py",
            "cost_report.py",
            "flaky_judge.py",
            "judge_cost.py",
            "judge_reward.py",
            "random_model.py",
            "ray_cluster.py",
            "rewards.py",
        ],
    }
    # at the top: the package's ROOT, the two shared modules, the pipeline's documented command, one converter
    assert sorted(os.path.basename(f) for f in glob.glob(os.path.join(ROOT, "scripts", "*.py"))) == [
        "__init__.py",
        "bytecode.py",
        "console.py",
        "materialize_model.py",
        "pipeline.py",
    ]


def module_graph(files) -> dict[str, set[str]]:
    """Module name -> the project modules it imports (anywhere in the file, also inside functions)."""
    names = {os.path.relpath(f, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__"): f for f in files}
    graph = {}
    for name, path in names.items():
        deps = set()
        tree = _tree(path)
        for mod in imports(tree):
            deps |= {m for m in names if mod == m or mod.startswith(m + ".")}
        for node in ast.walk(tree):  # `from scripts import launch` imports scripts.launch
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                deps |= {f"{node.module}.{a.name}" for a in node.names} & names.keys()
        graph[name] = deps - {name, name.rsplit(".", 1)[0]}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, as a path that returns to its start (depth-first search)."""
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                found.append(path[path.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_import_cycle_in_scripts():
    graph = module_graph(glob.glob(os.path.join(ROOT, "scripts", "**", "*.py"), recursive=True))
    assert "scripts.launch.launcher" in graph["scripts.workflows.pipeline"]  # `from scripts.launch import launcher`
    assert cycles(graph) == []


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _layer(module: str):
    return next((i for i, layer in enumerate(LAYERS) for m in layer if module == m or module.startswith(m + ".")), None)


def test_layers_import_downwards_only():
    """reward_fns <- data_prep <- the launch layer <- pipeline / bench: nothing imports a layer above its own."""
    files = [
        f
        for d in ("scripts", "reward_fns", "data_prep")
        for f in glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True)
    ]
    upward = [
        f"{m} imports {d}"
        for m, deps in module_graph(files).items()
        for d in deps
        if _layer(m) is not None and _layer(d) is not None and _layer(d) > _layer(m)
    ]
    assert upward == []


@pytest.mark.parametrize("path", OWN_FILES, ids=[_rel(p) for p in OWN_FILES])
def test_no_sys_path_edits(path):
    tree = _tree(path)
    edits = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"
    ]
    assert edits == []


@pytest.mark.parametrize("path", PRODUCT_FILES, ids=[_rel(p) for p in PRODUCT_FILES])
def test_nothing_outside_tests_imports_tests(path):
    assert [m for m in imports(_tree(path)) if m.split(".")[0] in ("tests", "conftest")] == []


def test_the_lab_door_is_one_way():
    """Nothing outside scripts/lab (the product: reward_fns, data_prep, scripts; the recipes) imports the lab."""
    files = [f for f in PRODUCT_FILES if not f.startswith(LAB + os.sep)]
    files += glob.glob(os.path.join(ROOT, "recipes", "**", "*.py"), recursive=True)
    graph = module_graph(glob.glob(os.path.join(ROOT, "scripts", "**", "*.py"), recursive=True))
    assert [d for d in graph["scripts.lab.policy_learns"] if d.startswith("scripts.workflows")]  # the lab uses them
    through = [
        f"{_rel(f)} imports {m}" for f in files for m in imports(_tree(f)) if m.split(".")[:2] == ["scripts", "lab"]
    ]
    through += [
        f"{_rel(f)}: from scripts import lab"
        for f in files
        for n in ast.walk(_tree(f))
        if isinstance(n, ast.ImportFrom) and n.module == "scripts" and any(a.name == "lab" for a in n.names)
    ]
    assert through == []


def test_one_fake_server_class():
    tree = _tree(os.path.join(ROOT, "tests", "doubles", "fake_openai.py"))
    servers = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Server")]
    assert servers == ["FakeOpenAIServer"]


def test_tests_mirror_the_packages():
    """tests/<package path>/test_<concern>.py for each product package; at the top only the repository-wide tests (the
    kept results in docs/results, the lint rules) and the shared conftest and helpers."""
    tests = os.path.join(ROOT, "tests")
    folders = sorted(
        os.path.relpath(d, tests)
        for d, _, files in os.walk(tests)
        if any(f.startswith("test_") and f.endswith(".py") for f in files) and d != tests
    )
    assert folders == [
        "data_prep",
        "reward_fns",
        "scripts",
        "scripts/eval",
        "scripts/lab",
        "scripts/lab/bench",
        "scripts/launch",
        "scripts/report",
        "scripts/train",
        "scripts/workflows",
    ]
    assert [f for f in folders if not os.path.isfile(os.path.join(ROOT, f, "__init__.py"))] == []  # each a package
    assert sorted(f for f in os.listdir(tests) if f.endswith(".py")) == [
        "__init__.py",
        "conftest.py",
        "layout_helpers.py",
        "test_docs.py",
        "test_lint.py",
        "test_results.py",
    ]
