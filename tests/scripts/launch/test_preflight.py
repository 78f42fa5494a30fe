"""What the dry run (``DRY_RUN=1``, the launcher's own ``main``) catches before a GPU would, on CPU:

* the default data is what was asked for or a named choice: without GSM8K the word-problem testbed in a folder and
  ``data_source`` of its own, said in the plan; a set built from one source is built again for another;
* ``TRAIN_FILES`` without ``VAL_FILES`` (and the other way round) stops, naming both;
* training parquet(s) smaller than one batch, validation parquet(s) with no row;
* a judge API not on this machine with its key variable unset (never a value);
* a Ray job's ``RAY_ADDRESS`` where no dashboard answers: one line, before anything is submitted.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from scripts.launch import defaults, preflight
from scripts.launch import launcher as launch
from tests.scripts.launch.test_recipes import (  # noqa: F401  (fx, gsm8k_dir: the module fixtures)
    GSM8K_ROWS,
    ROOT,
    SECRET,
    fx,
    gsm8k_dir,
    recipe_files,
    sdpa_off,
)

pytest.importorskip("verl")


def dry_run(recipe, env, *args, capsys) -> tuple[int, str]:
    rc = launch.main([recipe, *args], {**env, "DRY_RUN": "1"})
    return rc, capsys.readouterr().out


def write_parquet(path, rows: int, recipe_file: str) -> str:
    import pyarrow.parquet as pq

    one = pq.read_table(recipe_file).slice(0, 1)
    pq.write_table(one.take([0] * rows) if rows else one.slice(0, 0), str(path))
    return str(path)


# ----------------------------------------------------------------------------------------------- default data source
# scenario -> (the sets under DATA_DIR before the first step, with data files but no source.json: unrecorded; steps,
# each (GSM8K_DIR: "given" / "other" / None, the folder under DATA_DIR trained on, its data_source, a line the dry run
# prints)); the steps share DATA_DIR, in order, and each builds no set but its own
DATA_SCENARIOS = {
    "gsm8k_after_testbed_is_gsm8k": ([], [
        (
            None,
            "word_problems_p512",
            "word_problems",
            "[launch] note: data (gsm8k): built from the word-problem testbed {data}/word_problems into "
            "{data}/word_problems_p512 (data_source=word_problems): GSM8K is neither given (GSM8K_DIR) nor reachable "
            "(the HF hub), so this run trains on synthetic word problems, not GSM8K\n",
        ),
        (
            "given",
            "gsm8k_p512",
            "openai/gsm8k",
            "[launch] note: data (gsm8k): built from GSM8K files in {given} into {data}/gsm8k_p512\n",
        ),
    ]),
    "unrecorded_then_another_gsm8k_dir_rebuild": (["gsm8k_p512"], [
        (
            "given",
            "gsm8k_p512",
            "openai/gsm8k",
            "[launch] data (gsm8k): {data}/gsm8k_p512 was built from an unrecorded source (no source.json), this run "
            "asks for GSM8K files in {given}: building it again\n",
        ),
        (
            "other",
            "gsm8k_p512",
            "openai/gsm8k",
            "[launch] data (gsm8k): {data}/gsm8k_p512 was built from GSM8K files in {given}, this run asks for "
            "GSM8K files in {other}: building it again\n",
        ),
        ("other", "gsm8k_p512", "openai/gsm8k", "into {data}/gsm8k_p512 (exists)\n"),
    ]),
}  # fmt: skip


@pytest.mark.parametrize("scenario", list(DATA_SCENARIOS))
def test_default_data_is_the_source_asked_for(scenario, gsm8k_dir, model_path, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    monkeypatch.setattr(defaults, "SHARED_GSM8K", str(tmp_path / "no_shared"))
    other = tmp_path / "other_gsm8k"
    other.mkdir()
    for split in ("train", "test"):  # the same rows, another folder: another source
        (other / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    dirs = {"given": gsm8k_dir, "other": str(other), None: None}
    data = tmp_path / "data"
    unrecorded, steps = DATA_SCENARIOS[scenario]
    for folder in unrecorded:
        (data / folder).mkdir(parents=True)
        (data / folder / "train.parquet").write_text("x")
        (data / folder / "test.parquet").write_text("x")
    built = set(unrecorded)
    for gsm8k, folder, source, line in steps:
        env = sdpa_off(MODEL=model_path, DATA_DIR=data, OUTPUT_DIR=tmp_path / "run", HF_HUB_OFFLINE=1)
        if gsm8k:
            env["GSM8K_DIR"] = dirs[gsm8k]
        rc, out = dry_run("gsm8k_rule", env, capsys=capsys)
        assert rc == 0, out[-3000:]
        assert line.format(data=data, given=gsm8k_dir, other=other) in out, out[-3000:]
        train = data / folder / "train.parquet"
        assert f"TRAIN_FILES={train} VAL_FILES={data / folder / 'test.parquet'} " in out
        assert set(pq.read_table(train).column("data_source").to_pylist()) == {source}
        stamp = json.load(open(data / folder / "source.json"))["source"]
        assert stamp == (f"GSM8K files in {dirs[gsm8k]}" if gsm8k else f"the word-problem testbed {data}/word_problems")
        built.add(folder)  # the testbed alone builds no gsm8k_p512
        assert sorted(p.name for p in data.glob("*_p512")) == sorted(built)


def test_a_failed_rebuild_keeps_the_set_it_left_untouched(gsm8k_dir, model_path, tmp_path, monkeypatch, capsys):
    """A rebuild asked for by a wrong GSM8K_DIR fails before writing anything: the set built before stays recorded
    (its source.json was deleted, and the next run with the right folder built it all again)."""
    monkeypatch.setattr(defaults, "SHARED_GSM8K", str(tmp_path / "no_shared"))
    data = tmp_path / "data"
    env = sdpa_off(MODEL=model_path, DATA_DIR=data, OUTPUT_DIR=tmp_path / "run", HF_HUB_OFFLINE=1)
    rc, out = dry_run("gsm8k_rule", {**env, "GSM8K_DIR": gsm8k_dir}, capsys=capsys)
    assert rc == 0, out[-3000:]
    recorded = json.load(open(data / "gsm8k_p512" / "source.json"))
    assert recorded == {"source": f"GSM8K files in {gsm8k_dir}", "tokenizer": model_path}
    rc, out = dry_run("gsm8k_rule", {**env, "GSM8K_DIR": str(tmp_path / "typo")}, capsys=capsys)
    assert rc != 0 and "data_prep failed for gsm8k" in out
    assert json.load(open(data / "gsm8k_p512" / "source.json")) == recorded
    rc, out = dry_run("gsm8k_rule", {**env, "GSM8K_DIR": gsm8k_dir}, capsys=capsys)
    assert rc == 0 and f"into {data}/gsm8k_p512 (exists)" in out, out[-3000:]


# ----------------------------------------------------------------------------------------------- one of two files
HALF_GIVEN = {
    "train_only": (
        {"TRAIN_FILES": "train"},
        [],
        "TRAIN_FILES (or data.train_files=) is set but VAL_FILES (or data.val_files=) is not",
        "VAL_FILES",
    ),
    "val_only": (
        {"VAL_FILES": "test"},
        [],
        "VAL_FILES (or data.val_files=) is set but TRAIN_FILES (or data.train_files=) is not",
        "TRAIN_FILES",
    ),
    "train_argument_only": (
        {},
        ["data.train_files={train}"],
        "TRAIN_FILES (or data.train_files=) is set but VAL_FILES (or data.val_files=) is not",
        "VAL_FILES",
    ),
}


@pytest.mark.parametrize("name", list(HALF_GIVEN))
def test_one_data_file_without_the_other_stops(name, fx, model_path, tmp_path, capsys):
    knobs_, args, head, missing = HALF_GIVEN[name]
    files = {"train": fx[("policy", "train")], "test": fx[("policy", "test")]}
    env = sdpa_off(MODEL=model_path, DATA_DIR=tmp_path / "data", **{k: files[v] for k, v in knobs_.items()})
    rc, out = dry_run("gsm8k_rule", env, *[a.format(**files) for a in args], capsys=capsys)
    assert rc == 2
    assert (
        f"[launch] ERROR: {head}: set both, the training and the validation parquet of one task (data_prep writes "
        f"both: --train FILE --test FILE); without {missing} the run would use the recipe's default data for it\n"
    ) in out
    assert not os.path.exists(tmp_path / "data")


# ----------------------------------------------------------------------------------------------- rows against the batch
# (train rows per file, train files, validation rows, arguments) -> the CONFIG ERROR (None: config OK)
ROWS = {
    "train_5_rows": (5, 1, 5, [], "data.train_files: {train} has 5 row(s), fewer than one batch "
     "(data.train_batch_size=16): verl would stop with 'Train dataloader is empty!' after starting Ray and the "
     "models; add rows or lower data.train_batch_size"),
    "train_two_files_10_rows": (5, 2, 5, [], "data.train_files: {train} have 10 row(s), fewer than one batch "
     "(data.train_batch_size=16)"),
    "val_empty": (16, 1, 0, [], "data.val_files: {val} has no rows: nothing to validate on"),
    "train_5_rows_batch_4": (5, 1, 5, ["data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4"],
     None),
    "train_two_files_one_batch": (8, 2, 1, [], None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ROWS))
def test_data_smaller_than_one_batch_stops_the_dry_run(name, fx, model_path, tmp_path, capsys):
    rows, n_files, val_rows, args, msg = ROWS[name]
    policy = fx[("policy", "train")]
    train = [write_parquet(tmp_path / f"train{i}.parquet", rows, policy) for i in range(n_files)]
    val = write_parquet(tmp_path / "val.parquet", val_rows, policy)
    env = sdpa_off(MODEL=model_path, TRAIN_FILES=",".join(train), VAL_FILES=val)
    rc, out = dry_run("gsm8k_rule", env, *args, capsys=capsys)
    if msg is None:
        assert rc == 0 and "[launch] config OK: recipe gsm8k_rule " in out, out[-3000:]
    else:
        assert rc == 2 and f"[launch] CONFIG ERROR: {msg.format(train=', '.join(train), val=val)}" in out, out


# ----------------------------------------------------------------------------------------------- the judge API's key
# (knobs, arguments) -> the variable named as unset (None: config OK)
API_KEYS = {
    "openai_no_key": ({}, [], "OPENAI_API_KEY"),
    "openai_key_set": ({"OPENAI_API_KEY": SECRET}, [], None),
    "local_127": ({"JUDGE_BASE_URL": "http://127.0.0.1:9/v1"}, [], None),
    "local_localhost": ({"JUDGE_BASE_URL": "http://localhost:8000/v1"}, [], None),
    "local_ipv6": ({"JUDGE_BASE_URL": "http://[::1]:8000/v1"}, [], None),
    "other_host": ({"JUDGE_BASE_URL": "http://10.1.2.3:8000/v1"}, [], "OPENAI_API_KEY"),
    "own_key_variable_unset": (
        {"OPENAI_API_KEY": SECRET},
        ["++reward.custom_reward_function.reward_kwargs.api_key_env=MY_JUDGE_KEY"],
        "MY_JUDGE_KEY",
    ),
    "no_key_declared": ({}, ["++reward.custom_reward_function.reward_kwargs.api_key_env=null"], None),
}


@pytest.mark.parametrize("name", list(API_KEYS))
def test_judge_api_key_variable_is_set(name, fx, model_path, capsys):
    knobs_, args, unset = API_KEYS[name]
    env = sdpa_off(MODEL=model_path, **recipe_files(fx, "gsm8k_api_judge"), **knobs_)
    rc, out = dry_run("gsm8k_api_judge", env, *args, capsys=capsys)
    assert SECRET not in out
    if unset is None:
        assert rc == 0 and "[launch] config OK: recipe gsm8k_api_judge " in out, out[-3000:]
        return
    host = (knobs_.get("JUDGE_BASE_URL") or "https://api.openai.com/v1").split("/")[2]
    assert rc == 2, out[-3000:]
    assert (
        f"[launch] CONFIG ERROR: reward.custom_reward_function.reward_kwargs.api_key_env: the judge API {host} is not "
        f"on this machine and {unset} is not set: set {unset} to its key (or, for an endpoint that takes no key, "
        "++reward.custom_reward_function.reward_kwargs.api_key_env=null)\n"
    ) in out


# ----------------------------------------------------------------------------------------------- the Ray dashboard
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hint(address: str, url: str, why: str, host: str = "127.0.0.1") -> str:
    return (
        f"RAY_ADDRESS={address}: no Ray dashboard answers at {url}/api/version ({why}); ray job submit needs the "
        f"dashboard's HTTP address, e.g. RAY_ADDRESS=http://{host}:8265 (the dashboard port, not the GCS port 6379), "
        "with the cluster up; nothing was submitted"
    )


def test_ray_job_to_an_address_nothing_answers_stops_in_one_line(fx, model_path, tmp_path):
    """The real launcher (no DRY_RUN), in a child bounded by a timeout: exit 2, one ERROR line, no submit (the
    address as ``host:port``: test_ray_address_error's "refused")."""
    address = f"http://127.0.0.1:{closed_port()}"
    env = sdpa_off(MODEL=model_path, RAY_ADDRESS=address, OUTPUT_DIR=tmp_path / "run", **recipe_files(fx, "gsm8k_rule"))
    r = subprocess.run(
        [sys.executable, "-m", "scripts.launch", "gsm8k_rule"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "ERROR" in ln or "Traceback" in ln]
    expected = f"[launch] ERROR: {hint(address, address, '[Errno 111] Connection refused')}"
    assert (r.returncode, errors) == (2, [expected])
    assert not os.path.exists(tmp_path / "run")


class _Dashboard(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"version": "4", "ray_version": "2.x"}).encode() if self.path == "/api/version" else b""
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def _serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("kind", ["dashboard", "not_http", "not_found", "refused", "auto", "ray_client"])
def test_ray_address_error(kind):
    """A dashboard answering: None; a port speaking something else (the GCS port) or nothing: the hint; addresses ray
    resolves otherwise: not probed."""
    if kind == "refused":  # host:port, as the launcher hands it on: probed as http://host:port
        address = f"127.0.0.1:{closed_port()}"
        got = preflight.ray_address_error(address)
        assert got == hint(address, f"http://{address}", "[Errno 111] Connection refused")
        return
    if kind in ("auto", "ray_client"):
        assert preflight.ray_address_error("auto" if kind == "auto" else f"ray://127.0.0.1:{closed_port()}") is None
        return
    if kind == "not_http":  # answers a line that is no HTTP status line, as a gRPC port does
        listener = socket.create_server(("127.0.0.1", 0))

        def answer():
            conn, _ = listener.accept()
            conn.recv(4096)
            conn.sendall(b"\x00\x00\x12\x04\x00\x00\x00\x00\x00garbage\r\n\r\n")
            conn.close()

        threading.Thread(target=answer, daemon=True).start()
        port = listener.getsockname()[1]
        try:
            got = preflight.ray_address_error(f"127.0.0.1:{port}", deadline_s=10)
        finally:
            listener.close()
        assert got is not None and got.startswith(f"RAY_ADDRESS=127.0.0.1:{port}: no Ray dashboard answers at ")
        return
    server = _serve(_Dashboard)
    port = server.server_address[1]
    try:
        address = f"http://127.0.0.1:{port}" + ("/nope" if kind == "not_found" else "")
        got = preflight.ray_address_error(address, deadline_s=10)
    finally:
        server.shutdown()
    assert got == (None if kind == "dashboard" else hint(address, address, "HTTP 404"))
