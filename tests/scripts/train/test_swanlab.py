"""SwanLab as verl logs it, on CPU and without the network.

verl's own ``verl.utils.tracking.Tracking(default_backend=["swanlab", "file"])`` with the real ``swanlab``
package, in each mode that keeps runs on disk (``SWANLAB_MODE=local``: viewed with ``swanlab watch``;
``SWANLAB_MODE=offline``: uploaded later with ``swanlab sync``), logs three training steps of
``scripts.train.hooks.reward_metrics`` on fake LLM-judge extras plus ``critic/score/mean``, finishes, and
the run directory is read back:

* the run's record file (``run-<id>.swanlab``) through swanlab's own record reader: every step of every
  key with its exact value, the run's project and name, and a finished state;
* in local mode, the dashboard's store (``runs.swanlab`` and ``logs/<tag>/``) that ``swanlab watch``
  serves: the same keys and values;
* verl's file logger (JSONL) with the same steps.

No API key is set and every connection or name lookup to a non-loopback address is refused and recorded;
the test asserts there was none.
"""

from __future__ import annotations

import glob
import ipaddress
import json
import os
import socket
import sqlite3

import pytest

pytest.importorskip("verl")
swanlab = pytest.importorskip("swanlab")

from scripts.train.hooks import reward_metrics  # noqa: E402

PROJECT = "verl-judge"
EXPERIMENT = "judge_pointwise"

# One row per training step: the reward function's extra keys for 4 samples, verl's critic/score/mean,
# and the exact metrics reward_metrics derives from them.
STEPS = [
    {  # one transport error, one unparseable reply, two answered samples that agree with the rule
        "extras": {
            "score": [1.0, 0.0, 0.0, 0.0],
            "judge_error": [0, 0, 0, 1],
            "judge_parse_fail": [0, 1, 0, 0],
            "judge_skipped": [0, 0, 0, 0],
            "judge_fallback": [0, 0, 0, 1],
            "judge_score": [4, 0, 1, 0],
            "rule_score": [1, 0, 0, 1],
        },
        "critic/score/mean": -0.5,
        "metrics": {
            "reward/judge_error/mean": 0.25,
            "reward/judge_fallback/mean": 0.25,
            "reward/judge_parse_fail/mean": 0.25,
            "reward/judge_score/mean": 1.25,
            "reward/judge_skipped/mean": 0.0,
            "reward/rule_score/mean": 0.5,
            "judge_health/error_rate": 0.25,
            "judge_health/parse_fail_rate": 0.25,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 0.25,
            "judge_health/answered_rate": 0.5,
            "judge_health/score_mean": 2.5,
            "judge_health/agree_rule": 1.0,
            "judge_health/accept_rule_reject": 0.0,
            "judge_health/reject_rule_accept": 0.0,
        },
    },
    {  # every sample answered; the verdict disagrees with the rule on one of four
        "extras": {
            "score": [1.0, 1.0, 0.0, 0.0],
            "judge_error": [0, 0, 0, 0],
            "judge_parse_fail": [0, 0, 0, 0],
            "judge_skipped": [0, 0, 0, 0],
            "judge_fallback": [0, 0, 0, 0],
            "judge_score": [3, 4, 2, 0],
            "rule_score": [1, 0, 0, 0],
        },
        "critic/score/mean": 1.0,
        "metrics": {
            "reward/judge_error/mean": 0.0,
            "reward/judge_fallback/mean": 0.0,
            "reward/judge_parse_fail/mean": 0.0,
            "reward/judge_score/mean": 2.25,
            "reward/judge_skipped/mean": 0.0,
            "reward/rule_score/mean": 0.25,
            "judge_health/error_rate": 0.0,
            "judge_health/parse_fail_rate": 0.0,
            "judge_health/skipped_rate": 0.0,
            "judge_health/fallback_rate": 0.0,
            "judge_health/answered_rate": 1.0,
            "judge_health/score_mean": 2.25,
            "judge_health/agree_rule": 0.75,
            "judge_health/accept_rule_reject": 0.25,
            "judge_health/reject_rule_accept": 0.0,
        },
    },
    {  # a silent judge: errors, a parse failure, a skip; nothing answered
        "extras": {
            "score": [0.0, 0.0, 0.0, 0.0],
            "judge_error": [1, 1, 0, 0],
            "judge_parse_fail": [0, 0, 1, 0],
            "judge_skipped": [0, 0, 0, 1],
            "judge_fallback": [1, 1, 0, 1],
            "judge_score": [0, 0, 0, 0],
            "rule_score": [1, 1, 1, 1],
        },
        "critic/score/mean": 0.25,
        "metrics": {
            "reward/judge_error/mean": 0.5,
            "reward/judge_fallback/mean": 0.75,
            "reward/judge_parse_fail/mean": 0.25,
            "reward/judge_score/mean": 0.0,
            "reward/judge_skipped/mean": 0.25,
            "reward/rule_score/mean": 1.0,
            "judge_health/error_rate": 0.5,
            "judge_health/parse_fail_rate": 0.25,
            "judge_health/skipped_rate": 0.25,
            "judge_health/fallback_rate": 0.75,
            "judge_health/answered_rate": 0.0,
            "judge_health/score_mean": 0.0,
            "judge_health/agree_rule": 0.0,
            "judge_health/accept_rule_reject": 0.0,
            "judge_health/reject_rule_accept": 0.0,
        },
    },
]
JUDGE_HEALTH_KEYS = {
    "judge_health/error_rate",
    "judge_health/parse_fail_rate",
    "judge_health/skipped_rate",
    "judge_health/fallback_rate",
    "judge_health/answered_rate",
    "judge_health/score_mean",
    "judge_health/agree_rule",
    "judge_health/accept_rule_reject",
    "judge_health/reject_rule_accept",
}

# mode -> whether the run also feeds the local dashboard store that `swanlab watch` serves
MODES = {"local": True, "offline": False}


def step_metrics(row: dict) -> dict[str, float]:
    return {**reward_metrics(row["extras"]), "critic/score/mean": row["critic/score/mean"]}


def expected_series() -> dict[str, dict[int, float]]:
    """{key: {step: value}} of everything the three steps log."""
    out: dict[str, dict[int, float]] = {}
    for step, row in enumerate(STEPS, start=1):
        for k, v in {**row["metrics"], "critic/score/mean": row["critic/score/mean"]}.items():
            out.setdefault(k, {})[step] = v
    return out


# ------------------------------------------------------------------------------------------ no network
def _is_loopback(host) -> bool:
    if host is None or host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def network_attempts(monkeypatch) -> list:
    """Refuse (and record) every name lookup or connection that is not to this machine's loopback."""
    attempts: list = []
    real_getaddrinfo = socket.getaddrinfo
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def getaddrinfo(host, *args, **kwargs):
        if not _is_loopback(host):
            attempts.append(("getaddrinfo", host))
            raise socket.gaierror(socket.EAI_NONAME, f"network disabled in tests: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def check(addr):
        if isinstance(addr, tuple) and not _is_loopback(addr[0]):
            attempts.append(("connect", addr))
            raise ConnectionRefusedError(f"network disabled in tests: {addr}")

    def connect(self, addr):
        check(addr)
        return real_connect(self, addr)

    def connect_ex(self, addr):
        check(addr)
        return real_connect_ex(self, addr)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return attempts


@pytest.fixture
def swanlab_env(tmp_path, monkeypatch):
    """No SwanLab setting or key from the caller's environment; logs, swanlab's home and cwd in tmp_path."""
    for k in list(os.environ):
        if k.startswith("SWANLAB_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(tmp_path / "swanlog"))
    monkeypatch.setenv("SWANLAB_ROOT", str(tmp_path / "swanlab-home"))  # no ~/.swanlab credentials read or written
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    monkeypatch.chdir(tmp_path)  # swanlab also reads ./.env and ./.swanlab
    return tmp_path


# ------------------------------------------------------------------------------------------ readers
def read_record_file(run_dir: str) -> dict:
    """The run's record file through swanlab's own reader (the one `swanlab sync` uploads from)."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    (path,) = glob.glob(os.path.join(run_dir, "run-*.swanlab"))
    reader = DataStoreReader()
    reader.open(path)
    out: dict = {"series": {}, "columns": set(), "start": None, "finish": None}
    try:
        for raw in reader:
            rec = Record()
            rec.ParseFromString(raw)
            kind = rec.WhichOneof("record_type")
            if kind == "scalar":
                series = out["series"].setdefault(rec.scalar.key, {})
                assert rec.scalar.step not in series, f"step {rec.scalar.step} of {rec.scalar.key} logged twice"
                series[rec.scalar.step] = rec.scalar.value.number
            elif kind == "column":
                out["columns"].add(rec.column.column_key)
            elif kind in ("start", "finish"):
                out[kind] = getattr(rec, kind)
    finally:
        reader.close()
    return out


def read_dashboard_store(log_dir: str, run_dir: str) -> dict:
    """What `swanlab watch` serves: runs.swanlab (project, experiment, tag -> folder) and logs/<folder>/*.log."""
    con = sqlite3.connect(os.path.join(log_dir, "runs.swanlab"))
    try:
        projects = [r[0] for r in con.execute("select name from project")]
        experiments = con.execute("select id, run_id, name from experiment").fetchall()
        ((exp_id, run_id, name),) = experiments
        tags = dict(con.execute("select name, folder from tag where experiment_id = ?", (exp_id,)).fetchall())
    finally:
        con.close()
    series: dict = {}
    for key, folder in tags.items():
        for path in sorted(glob.glob(os.path.join(run_dir, "logs", folder, "*.log"))):
            with open(path) as f:
                for line in f:
                    row = json.loads(line)
                    series.setdefault(key, {})[row["index"]] = row["data"]
    return {"projects": projects, "run_id": run_id, "name": name, "series": series}


# ------------------------------------------------------------------------------------------ tests
def test_step_table_is_what_reward_metrics_returns():
    for row in STEPS:
        assert reward_metrics(row["extras"]) == row["metrics"]
        assert JUDGE_HEALTH_KEYS <= set(row["metrics"])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_verl_tracking_writes_judge_metrics_to_swanlab(mode, swanlab_env, network_attempts, monkeypatch):
    from swanlab.proto.swanlab.run.v1.run_pb2 import RunState
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("SWANLAB_MODE", mode)
    log_dir = str(swanlab_env / "swanlog")
    tracking = Tracking(
        project_name=PROJECT,
        experiment_name=EXPERIMENT,
        default_backend=["swanlab", "file"],
        config={"trainer": {"project_name": PROJECT, "experiment_name": EXPERIMENT}},
    )
    try:
        for step, row in enumerate(STEPS, start=1):
            tracking.log(data=step_metrics(row), step=step)
    finally:
        tracking.finish()

    assert network_attempts == []
    runs = sorted(glob.glob(os.path.join(log_dir, "run-*")))
    assert len(runs) == 1, runs
    run_dir = runs[0]
    want = expected_series()

    records = read_record_file(run_dir)
    assert records["series"] == want
    assert records["columns"] == set(want)
    assert JUDGE_HEALTH_KEYS <= set(records["series"])
    assert (records["start"].project, records["start"].name) == (PROJECT, EXPERIMENT)
    assert records["finish"].state == RunState.RUN_STATE_FINISHED

    if MODES[mode]:
        store = read_dashboard_store(log_dir, run_dir)
        assert store["projects"] == [PROJECT]
        assert (store["run_id"], store["name"]) == (os.path.basename(run_dir), EXPERIMENT)
        assert store["series"] == want
    else:
        assert not os.path.exists(os.path.join(log_dir, "runs.swanlab"))

    with open(swanlab_env / "metrics.jsonl") as f:
        lines = [json.loads(line) for line in f]
    assert lines == [{"step": s, "data": step_metrics(row)} for s, row in enumerate(STEPS, start=1)]
