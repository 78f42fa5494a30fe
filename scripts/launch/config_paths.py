"""The files a composed recipe config points at: model folders, data files, the reward function and its name
(``check_paths``; a remote path or a hub id is noted, not checked), data too small for a batch
(``data_rows_errors``) and the reward's ``reward_kwargs`` (``reward_option_errors``). Part of
``scripts/launch/verl_config.py`` (``--paths error|warn|off``):

    from scripts.launch.config_paths import check_paths; errors, notes = check_paths(cfg)
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re

import scripts

ROOT = scripts.ROOT
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_REMOTE = ("hdfs://", "s3://", "gs://", "http://", "https://")


def _as_list(v) -> list:
    from omegaconf import ListConfig

    return [] if v is None else list(v) if isinstance(v, (list, tuple, ListConfig)) else [v]


def syntax_error(py_file: str) -> str | None:
    """Why ``py_file`` does not parse as Python (``SyntaxError: ... (line N)``), None when it does."""
    try:
        ast.parse(open(py_file, encoding="utf-8").read(), filename=py_file)
    except SyntaxError as e:
        return f"{type(e).__name__}: {e.msg} (line {e.lineno})"
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def _defines(py_file: str, name: str) -> bool:
    """Whether ``name`` is defined at module level in ``py_file`` (no import, no side effects)."""
    try:
        tree = ast.parse(open(py_file, encoding="utf-8").read(), filename=py_file)
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def resolve_module_file(module_path: str) -> str | None:
    """File behind a verl module path (``pkg://a.b``, ``pkg://a/b``, ``file://x.py`` or ``x.py``).

    ``pkg://`` modules are looked up as verl's workers import them, with the repository root first on
    their path: a file under the repository, else whatever this interpreter finds (nothing is imported
    from the repository)."""
    if module_path.startswith("pkg://"):
        mod = module_path[len("pkg://") :].replace("/", ".")
        rel = os.path.join(*mod.split("."))
        for f in (rel + ".py", os.path.join(rel, "__init__.py")):
            if os.path.isfile(os.path.join(ROOT, f)):
                return os.path.join(ROOT, f)
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            return None
        return spec.origin if spec and spec.origin and os.path.exists(spec.origin) else None
    if module_path.startswith("file://"):
        module_path = module_path[len("file://") :]
    p = os.path.expanduser(module_path)
    return p if os.path.isfile(p) else None


def check_paths(cfg) -> tuple[list[str], list[str]]:
    """(errors, notes) for every file the config points at."""
    from omegaconf import OmegaConf

    errors, notes = [], []

    def sel(key):
        return OmegaConf.select(cfg, key, default=None)

    def data_file(key):
        files = _as_list(sel(key))
        if not files:
            errors.append(f"{key} is empty")
        for f in files:
            f = str(f)
            if f.startswith(_REMOTE):
                notes.append(f"{key}: remote path not checked: {f}")
            elif not os.path.exists(os.path.expanduser(f)):
                errors.append(f"{key}: file not found: {f}")

    def model_dir(key):
        p = sel(key)
        if p is None:
            return
        p = str(p)
        if p.startswith(_REMOTE):
            notes.append(f"{key}: remote path not checked: {p}")
        elif os.path.isdir(os.path.expanduser(p)):
            if not os.path.exists(os.path.join(os.path.expanduser(p), "config.json")):
                errors.append(f"{key}: {p} has no config.json (not a Hugging Face model folder)")
        elif _HUB_ID.match(p) and not p.startswith((".", "~")):
            notes.append(f"{key}: '{p}' is not a local folder; assuming a Hugging Face hub id")
        else:
            errors.append(f"{key}: model folder not found: {p}")

    data_file("data.train_files")
    data_file("data.val_files")
    model_dir("actor_rollout_ref.model.path")
    model_dir("actor_rollout_ref.model.tokenizer_path")
    if sel("reward.reward_model.enable"):
        if sel("reward.reward_model.model_path") is None:
            errors.append("reward.reward_model.enable=True but reward.reward_model.model_path is not set")
        model_dir("reward.reward_model.model_path")
    if sel("verl_judge.judge_server.enable") and sel("verl_judge.judge_server.wait_for"):
        notes.append(
            f"verl_judge.judge_server.model: not checked now; the server starts once "
            f"{sel('verl_judge.judge_server.wait_for')} exists (a stage is making the judge)"
        )
    elif sel("verl_judge.judge_server.enable"):  # judge_placement=server: the model the launcher serves
        model_dir("verl_judge.judge_server.model")

    fn_path, fn_name = sel("reward.custom_reward_function.path"), sel("reward.custom_reward_function.name")
    if fn_path:
        f = resolve_module_file(str(fn_path))
        if f is None:
            errors.append(f"reward.custom_reward_function.path: reward function file/module not found: {fn_path}")
        elif not fn_name:
            errors.append("reward.custom_reward_function.name is empty")
        elif f.endswith(".py") and (why := syntax_error(f)):
            errors.append(f"reward.custom_reward_function.path: {f} is not valid Python: {why}")
        elif not _defines(f, str(fn_name)):
            errors.append(f"reward.custom_reward_function.name: '{fn_name}' is not defined in {f}")
    if sel("reward.reward_manager.source") == "importlib":
        mp = sel("reward.reward_manager.module.path")
        if not mp or resolve_module_file(str(mp)) is None:
            errors.append(f"reward.reward_manager.module.path: reward manager module not found: {mp}")
    cls_path = sel("data.custom_cls.path")
    if cls_path and resolve_module_file(str(cls_path)) is None:
        errors.append(f"data.custom_cls.path: file not found: {cls_path}")
    return errors, notes


def _parquets(cfg, key: str) -> tuple[list[str], list[tuple[str, object]]]:
    """``key``'s files (``data.train_files`` or ``data.val_files``) as written, and (path, ``ParquetFile``) of those
    that are local readable parquet files; remote, missing and unreadable ones are left out: verl names them."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf

    files, local = [str(f) for f in _as_list(OmegaConf.select(cfg, key, default=None))], []
    for f in map(os.path.expanduser, files):
        try:
            if not f.startswith(_REMOTE) and f.endswith(".parquet") and os.path.isfile(f):
                local.append((f, pq.ParquetFile(f)))
        except (pa.ArrowException, OSError):  # not a parquet file: verl names it when it opens it
            pass
    return files, local


def data_rows_errors(cfg) -> list[str]:
    """Data verl would find too small only after Ray and the models start: training parquet(s) with fewer rows than
    one batch (``data.train_batch_size``: verl's ``Train dataloader is empty!``), validation parquet(s) with none."""
    from omegaconf import OmegaConf

    errors = []
    train, local = _parquets(cfg, "data.train_files")
    rows, batch = sum(p.metadata.num_rows for _, p in local), OmegaConf.select(cfg, "data.train_batch_size")
    if len(local) == len(train) and isinstance(batch, int) and rows < batch:
        errors.append(
            f"data.train_files: {', '.join(train)} {'has' if len(train) == 1 else 'have'} {rows} row(s), fewer than "
            f"one batch (data.train_batch_size={batch}): verl would stop with 'Train dataloader is empty!' after "
            "starting Ray and the models; add rows or lower data.train_batch_size"
        )
    val, local = _parquets(cfg, "data.val_files")  # every one local, and no rows in any
    if val and len(local) == len(val) and not any(p.metadata.num_rows for _, p in local):
        errors.append(
            f"data.val_files: {', '.join(val)} {'has' if len(val) == 1 else 'have'} no rows: nothing to validate on"
        )
    return errors


#: rows of each data file whose labels the dry run reads (the first ones: a data set of another task fails at once)
LABEL_ROWS = 64


def label_errors(cfg) -> list[str]:
    """Local training and validation parquets whose first ``LABEL_ROWS`` labels (``reward_model.ground_truth``) the
    configured reward cannot read, as its module's ``check_label`` says (``reward_fns/*``: a ValueError): data built
    for another task (pairwise A/B labels under a pointwise judge's reward, a judge's labels under the GSM8K rule)
    would stop the run at its first reward call, after Ray and the models start. One message per file."""
    import pyarrow as pa
    from omegaconf import OmegaConf

    fn = OmegaConf.select(cfg, "reward.custom_reward_function", default=None)
    module = _reward_module(cfg, "check_label") if fn and fn.get("name") == "compute_score" else None
    if module is None:
        return []
    errors = []
    for key in ("data.train_files", "data.val_files"):
        for f, parquet in _parquets(cfg, key)[1]:
            try:
                batch = next(parquet.iter_batches(batch_size=LABEL_ROWS, columns=["reward_model"]), None)
            except (pa.ArrowException, OSError, KeyError, ValueError):  # no such column: verl names it
                continue
            rows = batch.to_pylist() if batch is not None else []
            bad = []
            for i, row in enumerate(rows):
                truth = (row.get("reward_model") or {}).get("ground_truth")
                try:
                    module.check_label(truth)
                except ValueError as e:
                    bad.append((i, e))
            if bad:
                i, e = bad[0]
                errors.append(
                    f"{key}: {f}: {len(bad)} of its first {len(rows)} rows have a label {fn.path} cannot read "
                    f"(row {i}: {e}); is this data made for another task?"
                )
    return errors


def _reward_module(cfg, needs: str):
    """The module of ``reward.custom_reward_function.path`` when it is a file of this repository that defines
    ``needs`` (only modules of this repository are imported here), else None."""
    from omegaconf import OmegaConf

    fn = OmegaConf.select(cfg, "reward.custom_reward_function", default=None)
    f = resolve_module_file(str(fn.path)) if fn and fn.get("path") else None
    if f is None or not f.startswith(ROOT + os.sep) or not _defines(f, needs):
        return None
    try:
        return importlib.import_module(os.path.relpath(f, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__"))
    except ImportError:  # a dependency missing here: the run's workers report it
        return None


def reward_function(cfg):
    """The configured reward function (``reward.custom_reward_function``'s ``path`` and ``name``) where its module is
    a file of this repository; None otherwise."""
    from omegaconf import OmegaConf

    name = str(OmegaConf.select(cfg, "reward.custom_reward_function.name", default=None))
    return getattr(_reward_module(cfg, name), name, None)


def reward_option_errors(cfg) -> list[str]:
    """What ``compute_score`` would refuse in ``reward.custom_reward_function.reward_kwargs`` at its first call, as the
    ``check_options(**kwargs) -> list[str]`` its module defines says (``reward_fns/*``); one message per problem,
    naming the key; [] without such a function."""
    from omegaconf import OmegaConf

    fn = OmegaConf.select(cfg, "reward.custom_reward_function", default=None)
    module = _reward_module(cfg, "check_options") if fn and fn.get("name") == "compute_score" else None
    if module is None:
        return []
    kwargs = OmegaConf.to_container(fn.get("reward_kwargs") or OmegaConf.create({}), resolve=True)
    return [f"reward.custom_reward_function.reward_kwargs ({fn.path}): {msg}" for msg in module.check_options(**kwargs)]
