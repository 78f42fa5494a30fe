"""Fault suite: every sample of a batch gets a score with the right flags, and nothing hangs.

Short per-attempt timeouts (reward kwargs) and a test server whose 429/5xx replies ask for a retry after
10 ms (``retry-after-ms``, honoured by the openai SDK) keep the whole file to seconds; timeouts and
dropped connections wait for the SDK's own backoff (0.5 s, then 1 s, less up to 25% jitter). Each test
asserts a wall-time bound.
"""

from __future__ import annotations

import asyncio
import email.utils
import socket
import threading
import time

import pytest

from reward_fns import llm_judge
from reward_fns.llm_judge import compute_score
from scripts.serve.fake_openai import FakeOpenAIServer

INFO = {"question": "What is 6 * 12?", "answer": "6 * 12 = 72\n#### 72"}
FAST = dict(timeout=0.5, max_retries=2, canary_every=0)
QUICK = dict(retry_after_ms="10")


@pytest.fixture(autouse=True)
def _fresh_clients():
    llm_judge._CLIENTS.clear()
    yield
    llm_judge._CLIENTS.clear()


def run_batch(base_url, responses, **kw):
    async def main():
        return await asyncio.gather(
            *(
                compute_score("openai/gsm8k", r, "72", INFO, base_url=base_url, model="judge", **{**FAST, **kw})
                for r in responses
            )
        )

    t0 = time.monotonic()
    outs = asyncio.run(main())
    return outs, time.monotonic() - t0


def flags(out):
    return (out["score"], out["judge_score"], out["judge_error"], out["judge_parse_fail"], out["judge_attempts"])


# response -> (score, judge_score, judge_error, judge_parse_fail, attempts); "#### 72" is right (rule 1).
# Transport failures get the fallback (the rule reward); a reply without a verdict earns what a real 0
# earns (0.0 in judge mode), right answer or not.
FAULT_TABLE = {
    "#### 72": (1.0, 4.0, 0.0, 0.0, 1.0),
    "#### 71": (0.25, 1.0, 0.0, 0.0, 1.0),
    "FAULT:latency:0.2\n#### 72": (1.0, 4.0, 0.0, 0.0, 1.0),  # slow but inside the 0.5 s timeout
    "FAULT:latency:0.8\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # every attempt times out
    "FAULT:hang\n#### 71": (0.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:429\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:429x2\n#### 72": (1.0, 4.0, 0.0, 0.0, 3.0),
    "FAULT:500\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:500x1\n#### 71": (0.25, 1.0, 0.0, 0.0, 2.0),
    "FAULT:503x2\n#### 72": (1.0, 4.0, 0.0, 0.0, 3.0),
    "FAULT:malformed_json\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:malformed_jsonx1\n#### 71": (0.25, 1.0, 0.0, 0.0, 2.0),
    "FAULT:no_choices\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:truncated\n#### 72": (0.0, -1.0, 0.0, 1.0, 1.0),  # a reply, cut mid-verdict: parse failure
    "FAULT:truncated\n#### 71": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:truncated_body\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # body shorter than Content-Length
    "FAULT:truncated_bodyx1\n#### 72": (1.0, 4.0, 0.0, 0.0, 2.0),
    "FAULT:drop\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # connection closed without a reply
    "FAULT:dropx2\n#### 71": (0.25, 1.0, 0.0, 0.0, 3.0),
    "#### 72 JUDGE_SAYS:junk": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:empty\n#### 72": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:big:2000000\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # over the default 1 MiB body cap: transport
}


def test_mixed_fault_batch():
    """One batch, every fault at once: exact flags per sample, bounded wall time."""
    responses = list(FAULT_TABLE) * 2  # duplicates share one request (or its retries)
    with FakeOpenAIServer(**QUICK) as srv:
        outs, wall = run_batch(srv.base_url, responses)
    n = len(FAULT_TABLE)
    assert {r: flags(o) for r, o in zip(responses[:n], outs[:n])} == FAULT_TABLE
    # the second copy of each sample rode on the first one's request: same verdict, no attempts of its own
    assert {r: flags(o) for r, o in zip(responses[n:], outs[n:])} == {r: f[:4] + (0.0,) for r, f in FAULT_TABLE.items()}
    assert [o["judge_cached"] for o in outs] == [0.0] * n + [1.0] * n
    # every judge_error here is a transport failure: each one, and only those, got the fallback
    assert [o["judge_fallback"] for o in outs] == [o["judge_error"] for o in outs]
    assert sum(o["judge_fallback"] for o in outs) == 2 * 9
    # the slowest samples: 3 timed-out attempts of 0.5 s + the SDK's two backoff sleeps (at most 0.5 + 1 s)
    assert wall < 4.0, wall
    for o in outs:
        assert list(o)[0] == "score" and all(type(v) is float for v in o.values())


# (server options, fault, least and most seconds between the failed attempt and its retry): the SDK
# waits what the server says -- retry-after-ms before Retry-After, seconds or an HTTP date, for 429 and 5xx
RETRY_AFTER = [
    (dict(retry_after="1"), "429x1", 1.0, 1.4),
    (dict(retry_after="0.3"), "429x1", 0.3, 0.7),
    (dict(retry_after="5", retry_after_ms="200"), "429x1", 0.2, 0.6),
    (dict(retry_after_ms="400"), "500x1", 0.4, 0.8),
    (dict(retry_after_ms="300"), "503x1", 0.3, 0.7),
    (dict(retry_after="HTTP-DATE+2"), "429x1", 0.9, 2.4),  # whole seconds: 1 to 2 s from now
]


@pytest.mark.parametrize("server_kw,fault,least,most", RETRY_AFTER, ids=range(len(RETRY_AFTER)))
def test_retry_after_is_honoured(server_kw, fault, least, most):
    if server_kw.get("retry_after") == "HTTP-DATE+2":
        server_kw = {**server_kw, "retry_after": email.utils.formatdate(time.time() + 2, usegmt=True)}
    with FakeOpenAIServer(**server_kw) as srv:
        outs, wall = run_batch(srv.base_url, [f"FAULT:{fault}\n#### 72"], timeout=2.0)
        t = [r.t for r in srv.requests]
    assert flags(outs[0]) == (1.0, 4.0, 0.0, 0.0, 2.0)
    assert least <= t[1] - t[0] <= most, t
    assert wall < most + 0.5


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_connection_refused():
    outs, wall = run_batch(f"http://127.0.0.1:{_free_port()}/v1", ["#### 72", "#### 71"] * 8, cache_size=0)
    assert [flags(o) for o in outs[:2]] == [(1.0, -1.0, 1.0, 0.0, 3.0), (0.0, -1.0, 1.0, 0.0, 3.0)]
    assert {flags(o) for o in outs} == {(1.0, -1.0, 1.0, 0.0, 3.0), (0.0, -1.0, 1.0, 0.0, 3.0)}
    assert wall < 2.5, wall  # three refused attempts and the SDK's two backoff sleeps (at most 0.5 + 1 s)


def test_server_stopped_mid_batch():
    """The server dies while requests are in flight and queued: all samples still finish."""
    responses = [f"step {i}\n#### {72 if i % 2 == 0 else 70 + i}" for i in range(32)]
    with FakeOpenAIServer(latency=0.3, capacity=8) as srv:

        def stop_in_the_second_wave():
            end = time.monotonic() + 10
            while srv.served < 8 and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.1)  # the first wave's replies are delivered, the second wave is being served
            srv.stop()

        stopper = threading.Thread(target=stop_in_the_second_wave)
        stopper.start()
        outs, wall = run_batch(srv.base_url, responses, cache_size=0)
        stopper.join()
        served = srv.served
    assert 8 <= served < 32  # the first wave was answered, the rest was not
    ok = [o for o in outs if o["judge_error"] == 0.0]
    failed = [o for o in outs if o["judge_error"] == 1.0]
    assert len(ok) == served and len(ok) + len(failed) == 32
    for i, o in enumerate(outs):
        rule = 1.0 if i % 2 == 0 else 0.0
        assert o["rule_score"] == rule
        if o["judge_error"]:
            assert (o["score"], o["judge_score"]) == (rule, -1.0)  # fallback = rule reward
        else:
            assert (o["score"], o["judge_score"]) == ((1.0, 4.0) if rule else (0.25, 1.0))
    assert wall < 3.0, wall


def test_deadline_bounds_a_call_end_to_end():
    """deadline caps one sample (queueing + attempts + sleeps) whatever timeout/max_retries say."""
    with FakeOpenAIServer() as srv:
        outs, wall = run_batch(srv.base_url, ["FAULT:hang\n#### 72"], timeout=30.0, max_retries=10, deadline=0.6)
    assert flags(outs[0]) == (1.0, -1.0, 1.0, 0.0, 1.0)
    assert 0.55 <= wall < 1.2, wall


def test_deadline_counts_queueing():
    """With one slot and a slow server, queued samples give up at the deadline instead of waiting."""
    with FakeOpenAIServer(latency=0.4) as srv:
        outs, wall = run_batch(
            srv.base_url, [f"#### 7{i}" for i in range(6)], max_concurrency=1, timeout=2.0, deadline=1.0, cache_size=0
        )
    errors = [o["judge_error"] for o in outs]
    assert errors[0] == 0.0 and sum(errors) >= 3  # 0.4 s each, one at a time: at most 2 fit in 1 s
    assert wall < 2.0, wall


def test_all_failing_server_many_samples_is_fast():
    """256 samples against a server that always 500s: all fall back, no pile-up."""
    with FakeOpenAIServer(mode="500", **QUICK) as srv:
        # a generous per-call timeout: on a loaded 2-core machine 256 concurrent calls may wait > 0.5 s to be read
        outs, wall = run_batch(srv.base_url, [f"#### {i}" for i in range(256)], cache_size=0, timeout=5.0)
        n = len(srv.requests)
    assert n == 3 * 256 and sum(o["judge_attempts"] for o in outs) == 3 * 256
    assert sum(o["judge_error"] for o in outs) == 256
    assert wall < 10.0, wall
