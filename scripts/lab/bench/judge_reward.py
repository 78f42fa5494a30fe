"""Benchmark the LLM-judge reward against a server of known capacity (not a timed test).

Scores N distinct GSM8K-style responses three ways against the same server and prints a Markdown
table:

1. **probe**: a bare aiohttp client keeping the server saturated (``--probe-concurrency`` requests
   in flight, no retries, no prompt building): the server's measured throughput. The floor for N
   samples is ``N / throughput``.
2. **llm_judge**: ``reward_fns.llm_judge.compute_score`` for every sample at once, as verl's reward
   worker calls it (``asyncio.gather`` over the batch; our client caps concurrency and retries).
   Reported: wall time, ratio to the floor (target <= 1.2).
3. **sequential**: the per-sample pattern (SkyRL-style): one request at a time, a fresh HTTP
   session per sample. Reported: wall time and our speed-up over it (target >= 10x).
   ``--seq-n k`` times only the first k samples and extrapolates linearly (marked in the table).

Each phase uses its own set of distinct responses, so no cache (ours or a server's prefix cache)
helps a later phase.

Servers:
* default: the fake server ``tests.doubles.fake_openai`` started in a subprocess with
  ``--capacity C --latency L`` (known throughput C/L requests per second).
* ``--base-url URL --model NAME``: any running OpenAI-compatible server (e.g. vLLM CPU from
  ``bash scripts/serve/cpu_judge.sh vllm``).

    python -m scripts.lab.bench.judge_reward                                # test server, 256 samples
    python -m scripts.lab.bench.judge_reward --capacity 16 --latency 0.05 --n 256
    python -m scripts.lab.bench.judge_reward --base-url http://127.0.0.1:8011/v1 --model PATH --max-tokens 32 --seq-n 32
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

import aiohttp

import scripts
from data_prep.files.outputs import write_json
from reward_fns import judge_service
from reward_fns.llm_judge import build_messages, compute_score
from scripts.workflows.cli import add_options, option

ROOT = scripts.ROOT

QUESTION = "A shop sells {a} apples in the morning and {b} in the afternoon. How many apples does it sell in total?"


def samples(n: int, offset: int) -> list[tuple[str, str, dict]]:
    """n distinct (response, ground truth, extra_info); half right, half wrong."""
    out = []
    for i in range(offset, offset + n):
        a, b = 10 + i, 3 + (i * 7) % 50
        right = i % 2 == 0
        ans = a + b if right else a + b + 1
        resp = f"Morning {a}, afternoon {b}. {a} + {b} = {ans}.\n#### {ans}"
        info = {
            "question": QUESTION.format(a=a, b=b),
            "answer": f"{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b}",
        }
        out.append((resp, str(a + b), info))
    return out


def _body(model: str, max_tokens: int, resp, gt, info) -> dict:
    return {"model": model, "messages": build_messages(resp, gt, info), "temperature": 0.0, "max_tokens": max_tokens}


async def _post(session, url: str, body: dict) -> int:
    """One chat request read to the end: 0 when it answered HTTP 200, else 1."""
    try:
        async with session.post(url, json=body) as r:
            await r.read()
            return int(r.status != 200)
    except aiohttp.ClientError:
        return 1


async def probe(url: str, model: str, batch, max_tokens: int, concurrency: int) -> tuple[float, int]:
    """Bare saturating client: (wall seconds, errors)."""
    sem = asyncio.Semaphore(concurrency)
    errors = 0
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as s:

        async def one(resp, gt, info):
            nonlocal errors
            async with sem:
                errors += await _post(s, url, _body(model, max_tokens, resp, gt, info))

        t0 = time.perf_counter()
        await asyncio.gather(*(one(*x) for x in batch))
        return time.perf_counter() - t0, errors


async def ours(base_url: str, model: str, batch, max_tokens: int, max_concurrency: int) -> tuple[float, int, int]:
    judge_service.CLIENTS.clear()
    kw = dict(
        base_url=base_url,
        model=model,
        max_tokens=max_tokens,
        max_concurrency=max_concurrency,
        timeout=600.0,
        deadline=None,
    )
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(compute_score("openai/gsm8k", r, gt, info, **kw) for r, gt, info in batch))
    wall = time.perf_counter() - t0
    for c in list(judge_service.CLIENTS.values()):
        await c.aclose()
    return wall, int(sum(o["judge_error"] for o in outs)), int(sum(o["judge_parse_fail"] for o in outs))


async def sequential(url: str, model: str, batch, max_tokens: int) -> tuple[float, int]:
    """One request at a time, a new session per sample (the per-sample client pattern)."""
    errors = 0
    t0 = time.perf_counter()
    for resp, gt, info in batch:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
            errors += await _post(s, url, _body(model, max_tokens, resp, gt, info))
    return time.perf_counter() - t0, errors


def start_test_server(capacity: int, latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.doubles.fake_openai", "--capacity", str(capacity), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"test server did not start: {line!r}")
    return proc, f"http://{line.split()[1]}/v1"


@dataclass(frozen=True, kw_only=True)
class Bench:
    """The command line's settings, each field an option (``--max-tokens``: ``max_tokens``)."""

    n: int = option(type=int, default=256, help="samples scored per phase (default 256)")
    capacity: int = option(type=int, default=16, help="test server: requests served at once")
    latency: float = option(type=float, default=0.05, help="test server: seconds per request")
    base_url: str | None = option(default=None, help="use a running server instead of the test server")
    model: str = option(default="judge", help="model name sent (a real server's served name)")
    label: str | None = option(default=None, help="server description for the table")
    max_tokens: int = option(type=int, default=64)
    max_concurrency: int = option(type=int, default=64, help="llm_judge max_concurrency (per process)")
    probe_concurrency: int = option(type=int, default=256)
    seq_n: int | None = option(
        type=int, default=None, help="time the sequential client on this many samples and extrapolate"
    )
    json: str | None = option(default=None, help="also write the numbers here")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m scripts.lab.bench.judge_reward",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(ap, Bench)
    return ap


def server(cfg: Bench) -> tuple[subprocess.Popen | None, str, str]:
    """``(the test server's process or None, base URL, the table's label)``: ``--base-url``, else a test server."""
    if cfg.base_url:
        return None, cfg.base_url, cfg.label or f"{cfg.base_url} ({cfg.model})"
    proc, base_url = start_test_server(cfg.capacity, cfg.latency)
    nominal = f"(nominal {cfg.capacity / cfg.latency:.0f} req/s)"
    return proc, base_url, cfg.label or f"test server, capacity {cfg.capacity} x latency {cfg.latency}s {nominal}"


def phases(cfg: Bench, base_url: str, seq_n: int) -> tuple:
    """The three phases' ``(wall seconds, errors[, parse failures])``, each on its own distinct samples, after a
    warm-up (connection setup, server-side compilation and caches)."""
    from reward_fns.judge_client import chat_completions_url

    url, n = chat_completions_url(base_url), cfg.n
    asyncio.run(probe(url, cfg.model, samples(8, 10_000), cfg.max_tokens, 8))
    probe_wall, probe_err = asyncio.run(probe(url, cfg.model, samples(n, 0), cfg.max_tokens, cfg.probe_concurrency))
    ours_wall, ours_err, ours_pf = asyncio.run(
        ours(base_url, cfg.model, samples(n, 20_000), cfg.max_tokens, cfg.max_concurrency)
    )
    seq_wall, seq_err = asyncio.run(sequential(url, cfg.model, samples(seq_n, 40_000), cfg.max_tokens))
    return (probe_wall, probe_err), (ours_wall, ours_err, ours_pf), (seq_wall, seq_err)


def table(row: dict, probe_wall: float) -> str:
    """The Markdown table of ``row`` (``main``'s numbers)."""
    n, floor, ours_wall, seq_full, errors = row["n"], row["floor_s"], row["ours_s"], row["sequential_s"], row["errors"]
    seq_n = row["sequential_measured_on"]
    seq_note = "" if seq_n == n else f" (extrapolated from {seq_n})"
    return "\n".join(
        [
            "| client | wall (s) | req/s | floor N/throughput (s) | ratio to floor "
            "| speed-up vs sequential | judge errors |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| probe (bare, saturating) | {probe_wall:.2f} | {row['server_throughput_rps']:.1f} | {floor:.2f} | 1.00 "
            f"| - | {errors['probe']} |",
            f"| llm_judge.compute_score (gather) | {ours_wall:.2f} | {n / ours_wall:.1f} | {floor:.2f} | "
            f"**{ours_wall / floor:.2f}** | **{seq_full / ours_wall:.1f}x** | {errors['ours']} |",
            f"| sequential per-sample client{seq_note} | {seq_full:.2f} | {n / seq_full:.1f} | {floor:.2f} | "
            f"{seq_full / floor:.2f} | 1.0x | {errors['sequential']} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    cfg = Bench(**vars(_parser().parse_args(argv)))
    proc, base_url, label = server(cfg)
    n = cfg.n
    seq_n = min(cfg.seq_n or n, n)
    try:
        (probe_wall, probe_err), (ours_wall, ours_err, ours_pf), (seq_wall, seq_err) = phases(cfg, base_url, seq_n)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    thr = n / probe_wall
    floor = n / thr
    seq_full = seq_wall * n / seq_n
    row = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "server": label,
        "n": n,
        "max_tokens": cfg.max_tokens,
        "max_concurrency": cfg.max_concurrency,
        "server_throughput_rps": thr,
        "floor_s": floor,
        "ours_s": ours_wall,
        "ratio_to_floor": ours_wall / floor,
        "sequential_s": seq_full,
        "sequential_measured_on": seq_n,
        "speedup_vs_sequential": seq_full / ours_wall,
        "errors": {"probe": probe_err, "ours": ours_err, "ours_parse_fail": ours_pf, "sequential": seq_err},
        "host": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    print(f"\n{row['date']} | {label} | N={n}, max_tokens={cfg.max_tokens} | {row['host']}\n")
    print(table(row, probe_wall))
    if cfg.json:
        write_json(cfg.json, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
