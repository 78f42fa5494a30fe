"""The LLM-judge reward when its judge fails: no failure the policy can cause pays more than a verdict of 0,
transport failures get the fallback, configuration errors stop the run (with no piece of the key in the message),
and under injected faults every sample of a batch gets a score with the right flags, and nothing hangs.

Everything runs against the fake server ``tests.doubles.fake_openai`` on 127.0.0.1 (no network). Short per-attempt
timeouts (reward kwargs) and a test server whose 429/5xx replies ask for a retry after 10 ms (``retry-after-ms``,
honoured by the openai SDK) keep the whole file to seconds; timeouts and dropped connections wait for the SDK's own
backoff (0.5 s, then 1 s, less up to 25% jitter), which the fault suite records instead of sleeping
(``retry_sleeps``). No test here measures time: each asserts outcomes, counts and the waits the SDK chose.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time

import pytest

from reward_fns.judge_client import JudgeClient, chat_completions_url
from reward_fns.judge_errors import JudgeConfigError
from reward_fns.llm_judge import KEYS, compute_score
from scripts.launch.services import free_port
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.reward_fns.test_judge_errors import KEY, KEY_VAR, WITHHELD

INFO = {"question": "What is 6 * 12?", "answer": "6 * 12 = 72\n#### 72"}
# timeouts far above a loaded 2-core machine's reply time, so only the faults meant to time out do (hang, latency:5)
FAST = dict(timeout=1.5, max_retries=1, max_response_bytes=2048, canary_every=0)
QUICK = dict(retry_after_ms="10")  # the test server's 429/5xx replies ask for a retry after 10 ms
RIGHT, WRONG = "#### 72", "#### 96"


def run_all(base_url, responses, **kw):
    async def main():
        return await asyncio.gather(
            *(
                compute_score("openai/gsm8k", r, "72", INFO, base_url=base_url, model="judge", **{**FAST, **kw})
                for r in responses
            ),
            return_exceptions=True,
        )

    return asyncio.run(main())


# ----------------------------------------------------------------------------- no failure pays more than a 0
#: failure kind -> the marker that makes the test judge produce it
KINDS = {
    "verdict 0": "JUDGE_SAYS:0",  # the reference: a real verdict, the lowest one
    # transport: the answer cannot cause these -> the fallback (default "rule"), judge_fallback=1
    "timeout": "FAULT:hang",
    "5xx after retries": "FAULT:500",
    "over-size body": "FAULT:big:5000",  # over max_response_bytes=2048
    # the judge answered (or refused this request) without a valid verdict: the answer can cause these
    "parse fail": "JUDGE_SAYS:x",
    "truncated reply": "FAULT:truncated",
    "empty reply": "FAULT:empty",
    "refused (HTTP 400)": "FAULT:400",
}
POLICY_CAUSED = ("parse fail", "truncated reply", "empty reply", "refused (HTTP 400)")

# (mode, answer) -> {kind: (score, judge_fallback)}, default fallback="rule", parse_fail_score="lowest".
# The same table is in reward_fns/README_llm_judge.md.
ORDER_TABLE = {
    ("judge", RIGHT): {
        "verdict 0": (0.0, 0.0),
        "timeout": (1.0, 1.0),
        "5xx after retries": (1.0, 1.0),
        "over-size body": (1.0, 1.0),
        "parse fail": (0.0, 0.0),
        "truncated reply": (0.0, 0.0),
        "empty reply": (0.0, 0.0),
        "refused (HTTP 400)": (0.0, 0.0),
    },
    ("judge", WRONG): {
        "verdict 0": (0.0, 0.0),
        "timeout": (0.0, 1.0),
        "5xx after retries": (0.0, 1.0),
        "over-size body": (0.0, 1.0),
        "parse fail": (0.0, 0.0),
        "truncated reply": (0.0, 0.0),
        "empty reply": (0.0, 0.0),
        "refused (HTTP 400)": (0.0, 0.0),
    },
    ("hybrid", RIGHT): {
        "verdict 0": (0.5, 0.0),
        "timeout": (1.0, 1.0),
        "5xx after retries": (1.0, 1.0),
        "over-size body": (1.0, 1.0),
        "parse fail": (0.5, 0.0),
        "truncated reply": (0.5, 0.0),
        "empty reply": (0.5, 0.0),
        "refused (HTTP 400)": (0.5, 0.0),
    },
    # a rule-wrong answer is gated to 0 in hybrid mode: the judge is never asked, nothing can fail
    ("hybrid", WRONG): {kind: (0.0, 0.0) for kind in KINDS},
}


@pytest.mark.parametrize(
    "mode,answer", list(ORDER_TABLE), ids=[f"{m}-{'right' if a == RIGHT else 'wrong'}" for m, a in ORDER_TABLE]
)
def test_no_failure_the_policy_can_cause_pays_more_than_a_zero(mode, answer):
    with FakeOpenAIServer(**QUICK) as srv:
        outs = run_all(srv.base_url, [f"{answer} {marker}" for marker in KINDS.values()], mode=mode)
    got = dict(zip(KINDS, outs))
    for kind in POLICY_CAUSED:
        assert got[kind]["score"] <= got["verdict 0"]["score"], (kind, got[kind], got["verdict 0"])
    assert {k: (o["score"], o["judge_fallback"]) for k, o in got.items()} == ORDER_TABLE[(mode, answer)]
    for o in outs:
        assert list(o) == list(KEYS) and all(type(v) is float for v in o.values())
    if (mode, answer) != ("hybrid", WRONG):
        assert [got[k]["judge_parse_fail"] for k in POLICY_CAUSED] == [1.0, 1.0, 1.0, 0.0]
        assert [got[k]["judge_error"] for k in KINDS] == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        assert [got[k]["judge_score"] for k in KINDS] == [0.0] + [-1.0] * 7


# (mode, answer, fallback) -> (score, judge_skipped, judge_fallback) with no endpoint (as in validation)
NO_ENDPOINT = [
    ("judge", RIGHT, "rule", (1.0, 1.0, 1.0)),
    ("judge", WRONG, "rule", (0.0, 1.0, 1.0)),
    ("hybrid", RIGHT, "rule", (1.0, 1.0, 1.0)),
    ("hybrid", WRONG, "rule", (0.0, 1.0, 0.0)),  # gated by the rule before any endpoint is needed
    ("judge", RIGHT, 0.25, (0.25, 1.0, 1.0)),
]


@pytest.mark.parametrize("mode,answer,fallback,expected", NO_ENDPOINT, ids=range(len(NO_ENDPOINT)))
def test_no_endpoint_fallback(mode, answer, fallback, expected):
    out = asyncio.run(compute_score("openai/gsm8k", answer, "72", INFO, mode=mode, fallback=fallback))
    assert (out["score"], out["judge_skipped"], out["judge_fallback"]) == expected


# ----------------------------------------------------------------------------- configuration errors stop the run
SERVER_KEY = "sk-" + "test-server-side-key-0000"  # fake


def _config_case(name):
    """(server kwargs, compute_score kwargs, env value of KEY_VAR, path after the port, status, fix, server said,
    requests the server's handler records: all 20, one attempt each; none where its router answers 404)."""
    return {
        "401 key variable unset": (
            dict(api_key=SERVER_KEY),
            dict(api_key_env=KEY_VAR),
            None,
            "/v1",
            401,
            f"the API key was rejected or is missing: check the environment variable '{KEY_VAR}' (api_key_env, NOT set "
            "in this process), and that it is exported to the reward workers",
            '{"error": {"message": "invalid api key"}}',
            20,
        ),
        "401 wrong key": (
            dict(api_key=SERVER_KEY),
            dict(api_key_env=KEY_VAR),
            "sk-wrong-0000",
            "/v1",
            401,
            f"the API key was rejected or is missing: check the environment variable '{KEY_VAR}' (api_key_env, set), "
            "and that it is exported to the reward workers",
            '{"error": {"message": "invalid api key"}}',
            20,
        ),
        "403": (
            dict(mode="403"),
            dict(api_key_env=KEY_VAR),
            "sk-some-0000",
            "/v1",
            403,
            f"the key may not use this model or endpoint: check the environment variable '{KEY_VAR}' "
            "(api_key_env, set), `model` ('judge') and base_url",
            '{"error": {"message": "forbidden"}}',
            20,
        ),
        "404 model": (
            dict(expect_model="judge-v2"),
            {},
            None,
            "/v1",
            404,
            "the model 'judge' is not served at this URL, or rejects a request field (the server's message says "
            "which): check `model` (for a judge served by verl's reward loop, the served name is the reward model's "
            "local path) and extra_body",
            '{"error": {"message": "The model `judge` does not exist.", "code": 404}}',
            20,
        ),
        "404 url": (
            {},
            {},
            None,
            "/api",
            404,
            "no chat-completions endpoint at this URL: check base_url (an API base such as https://api.openai.com/v1 "
            "or http://host:port/v1, or the full .../chat/completions URL)",
            "404: Not Found",
            0,
        ),
    }[name]


CONFIG_CASES = ["401 key variable unset", "401 wrong key", "403", "404 model", "404 url"]


@pytest.mark.parametrize("name", CONFIG_CASES)
def test_config_errors_raise_at_once(name, monkeypatch):
    """20 samples against an endpoint that rejects the configuration: every one raises, no retry, no fallback."""
    srv_kw, kw, key, path, status, fix, said, recorded = _config_case(name)
    monkeypatch.delenv(KEY_VAR, raising=False)
    if key is not None:
        monkeypatch.setenv(KEY_VAR, key)
    with FakeOpenAIServer(**srv_kw) as srv:
        base = f"http://{srv.address}{path}"
        outs = run_all(base, [f"#### {i}" for i in range(20)], max_retries=4, **kw)
        n_requests = len(srv.requests)
    url = f"{base}/chat/completions"
    message = f"judge configuration error: POST {url} answered HTTP {status}. Likely fix: {fix}. Server said: {said}"
    assert [type(o) for o in outs] == [JudgeConfigError] * 20
    assert {str(o) for o in outs} == {message}
    assert {(o.url, o.status) for o in outs} == {(url, status)}
    assert n_requests == recorded


def test_config_error_stops_a_gathered_batch():
    """As verl's reward loop gathers a batch: the first configuration error propagates."""
    with FakeOpenAIServer(api_key=SERVER_KEY) as srv:

        async def main():
            return await asyncio.gather(
                *(
                    compute_score(
                        "gsm8k", f"#### {i}", "72", INFO, base_url=srv.base_url, model="judge", api_key_env=None, **FAST
                    )
                    for i in range(20)
                )
            )

        with pytest.raises(JudgeConfigError, match=r"answered HTTP 401\. Likely fix: the API key was rejected"):
            asyncio.run(main())


def test_config_error_message_holds_no_piece_of_the_key(monkeypatch):
    """A 401 whose body echoes the key's head, at a URL that carries the key: neither is quoted."""
    monkeypatch.setenv(KEY_VAR, KEY)
    with FakeOpenAIServer() as srv:
        srv.push((401, json.dumps({"error": {"message": f"Incorrect API key provided: {KEY[:20]}****"}}).encode()))
        base = f"{srv.base_url}/chat/completions?api-key={KEY}"
        (out,) = run_all(base, ["#### 72"], api_key_env=KEY_VAR)
    url = chat_completions_url(base)
    assert KEY in url and srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert isinstance(out, JudgeConfigError)
    assert str(out) == (
        f"judge configuration error: POST {url.replace(KEY, '***')} answered HTTP 401. Likely fix: "
        f"the API key was rejected or is missing: check the environment variable '{KEY_VAR}' (api_key_env, set), and "
        f"that it is exported to the reward workers. Server said: {WITHHELD}"
    )


# ----------------------------------------------------------------------------- bounded reply bodies
# (response, expected flags): an over-size reply is a transport failure for the reward
OVERSIZE_REWARD = [
    (
        "FAULT:big:5000\n#### 72",
        dict(score=1.0, judge_score=-1.0, judge_error=1.0, judge_fallback=1.0, judge_attempts=2.0),
    ),
    (
        "FAULT:big:5000\n#### 96",
        dict(score=0.0, judge_score=-1.0, judge_error=1.0, judge_fallback=1.0, judge_attempts=2.0),
    ),
    (
        "FAULT:big:5000x1\n#### 72",
        dict(score=1.0, judge_score=4.0, judge_error=0.0, judge_fallback=0.0, judge_attempts=2.0),
    ),
    (
        "FAULT:big:1500\n#### 72",
        dict(score=1.0, judge_score=4.0, judge_error=0.0, judge_fallback=0.0, judge_attempts=1.0),
    ),
]


@pytest.mark.parametrize("response,expected", OVERSIZE_REWARD, ids=range(len(OVERSIZE_REWARD)))
def test_oversize_reply_is_a_transport_failure(response, expected):
    with FakeOpenAIServer() as srv:
        (out,) = run_all(srv.base_url, [response])
    assert {k: out[k] for k in expected} == expected


# ----------------------------------------------------------------------------- fault suite: a score for every sample
RETRYING = dict(timeout=2.0, max_retries=2, canary_every=0)


def run_batch(base_url, responses, **kw):
    async def main():
        return await asyncio.gather(
            *(
                compute_score("openai/gsm8k", r, "72", INFO, base_url=base_url, model="judge", **{**RETRYING, **kw})
                for r in responses
            )
        )

    return asyncio.run(main())


@pytest.fixture()
def retry_sleeps(monkeypatch):
    """The openai SDK's waits before each retry, in seconds, recorded and not slept: what it decided to wait (from
    the server's retry headers, or its own backoff), read without a clock."""
    import anyio
    import openai._base_client as base

    assert base.anyio is anyio  # the SDK sleeps between attempts with anyio.sleep(seconds)
    slept: list[float] = []

    async def sleep(seconds):
        slept.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(anyio, "sleep", sleep)
    return slept


def flags(out):
    return (out["score"], out["judge_score"], out["judge_error"], out["judge_parse_fail"], out["judge_attempts"])


# response -> (score, judge_score, judge_error, judge_parse_fail, attempts); "#### 72" is right (rule 1).
# Transport failures get the fallback (the rule reward); a reply without a verdict earns what a real 0
# earns (0.0 in judge mode), right answer or not.
FAULT_TABLE = {
    "#### 72": (1.0, 4.0, 0.0, 0.0, 1.0),
    "#### 71": (0.0, 1.0, 0.0, 0.0, 1.0),  # a verdict of 1 for a wrong answer: checked, a contradiction
    "FAULT:latency:0.2\n#### 72": (1.0, 4.0, 0.0, 0.0, 1.0),  # slow but inside the 2 s timeout
    "FAULT:latency:5\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # every attempt times out
    "FAULT:hang\n#### 71": (0.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:429\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:429x2\n#### 72": (1.0, 4.0, 0.0, 0.0, 3.0),
    "FAULT:500\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:500x1\n#### 71": (0.0, 1.0, 0.0, 0.0, 2.0),
    "FAULT:503x2\n#### 72": (1.0, 4.0, 0.0, 0.0, 3.0),
    "FAULT:malformed_json\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:malformed_jsonx1\n#### 71": (0.0, 1.0, 0.0, 0.0, 2.0),
    "FAULT:no_choices\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),
    "FAULT:truncated\n#### 72": (0.0, -1.0, 0.0, 1.0, 1.0),  # a reply, cut mid-verdict: parse failure
    "FAULT:truncated\n#### 71": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:truncated_body\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # body shorter than Content-Length
    "FAULT:truncated_bodyx1\n#### 72": (1.0, 4.0, 0.0, 0.0, 2.0),
    "FAULT:drop\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # connection closed without a reply
    "FAULT:dropx2\n#### 71": (0.0, 1.0, 0.0, 0.0, 3.0),
    "#### 72 JUDGE_SAYS:junk": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:empty\n#### 72": (0.0, -1.0, 0.0, 1.0, 1.0),
    "FAULT:big:2000000\n#### 72": (1.0, -1.0, 1.0, 0.0, 3.0),  # over the default 1 MiB body cap: transport
}


def test_mixed_fault_batch(retry_sleeps):
    """One batch, every fault at once: exact flags per sample, one SDK retry wait per retry."""
    responses = list(FAULT_TABLE) * 2  # duplicates share one request (or its retries)
    with FakeOpenAIServer(**QUICK) as srv:
        outs = run_batch(srv.base_url, responses)
    n = len(FAULT_TABLE)
    assert {r: flags(o) for r, o in zip(responses[:n], outs[:n])} == FAULT_TABLE
    # the second copy of each sample rode on the first one's request: same verdict, no attempts of its own
    assert {r: flags(o) for r, o in zip(responses[n:], outs[n:])} == {r: f[:4] + (0.0,) for r, f in FAULT_TABLE.items()}
    assert [o["judge_cached"] for o in outs] == [0.0] * n + [1.0] * n
    # every judge_error here is a transport failure: each one, and only those, got the fallback
    assert [o["judge_fallback"] for o in outs] == [o["judge_error"] for o in outs]
    assert sum(o["judge_fallback"] for o in outs) == 2 * 9
    # every retry came after one wait of the SDK: 10 ms where the server said so (429, 5xx), else its backoff
    assert len(retry_sleeps) == sum(f[4] - 1 for f in FAULT_TABLE.values()) == 27
    assert [v for v in retry_sleeps if v != 0.01 and not 0.375 <= v <= 1.0] == []
    for o in outs:
        assert list(o)[0] == "score" and all(type(v) is float for v in o.values())


# (server options, fault, the SDK's wait before the retry in seconds): it waits what the server says --
# retry-after-ms before Retry-After, seconds or an HTTP date, for 429 and 5xx
RETRY_AFTER = [
    (dict(retry_after="1"), "429x1", 1.0),
    (dict(retry_after="0.3"), "429x1", 0.3),
    (dict(retry_after="5", retry_after_ms="200"), "429x1", 0.2),
    (dict(retry_after_ms="400"), "500x1", 0.4),
    (dict(retry_after_ms="300"), "503x1", 0.3),
    (dict(retry_after="HTTP-DATE+30"), "429x1", "29 to 30"),  # whole seconds: 29 to 30 s from now
]


@pytest.mark.parametrize("server_kw,fault,wait", RETRY_AFTER, ids=range(len(RETRY_AFTER)))
def test_retry_after_is_honoured(server_kw, fault, wait, retry_sleeps):
    if server_kw.get("retry_after") == "HTTP-DATE+30":
        server_kw = {**server_kw, "retry_after": email.utils.formatdate(time.time() + 30, usegmt=True)}
    with FakeOpenAIServer(**server_kw) as srv:
        outs = run_batch(srv.base_url, [f"FAULT:{fault}\n#### 72"], timeout=2.0)
        assert len(srv.requests) == 2
    assert flags(outs[0]) == (1.0, 4.0, 0.0, 0.0, 2.0)
    if isinstance(wait, str):  # a date: what is left of it when the SDK reads it (the backoff would be <= 0.5 s)
        assert len(retry_sleeps) == 1 and 20 < retry_sleeps[0] <= 30, retry_sleeps
    else:
        assert retry_sleeps == [wait]


def test_connection_refused(retry_sleeps):
    outs = run_batch(f"http://127.0.0.1:{free_port()}/v1", ["#### 72", "#### 71"] * 8, cache_size=0)
    assert [flags(o) for o in outs[:2]] == [(1.0, -1.0, 1.0, 0.0, 3.0), (0.0, -1.0, 1.0, 0.0, 3.0)]
    assert {flags(o) for o in outs} == {(1.0, -1.0, 1.0, 0.0, 3.0), (0.0, -1.0, 1.0, 0.0, 3.0)}
    # no server to say how long: the SDK's own backoff, 0.5 s then 1 s less up to 25% jitter, per sample
    first, second = sorted(retry_sleeps)[:16], sorted(retry_sleeps)[16:]
    assert len(retry_sleeps) == 32 and 0.375 <= min(first) <= max(first) <= 0.5 <= 0.75 <= min(second) <= max(second)
    assert max(second) <= 1.0


def test_server_stopped_mid_batch():
    """The server dies while requests are in flight and queued: all samples still finish."""
    responses = [f"step {i}\n#### {72 if i % 2 == 0 else 70 + i}" for i in range(32)]
    with FakeOpenAIServer(latency=0.3, capacity=8) as srv:

        async def main():
            kw = dict(base_url=srv.base_url, model="judge", **{**RETRYING, "cache_size": 0})
            tasks = [asyncio.create_task(compute_score("openai/gsm8k", r, "72", INFO, **kw)) for r in responses]
            for first_wave, done in enumerate(asyncio.as_completed(tasks), 1):
                await done
                if first_wave == 8:  # 8 replies delivered: the second wave is being served
                    break
            await asyncio.to_thread(srv.stop)
            return await asyncio.gather(*tasks)

        outs = asyncio.run(main())
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
            assert (o["score"], o["judge_score"]) == ((1.0, 4.0) if rule else (0.0, 1.0))


def test_deadline_bounds_a_call_end_to_end():
    """deadline caps one sample (queueing + attempts + sleeps) whatever timeout/max_retries say: against a server
    that never answers, the one attempt ends by the deadline (timeout=30 s and 10 retries would take minutes)."""
    with FakeOpenAIServer() as srv:
        (out,) = run_batch(srv.base_url, ["FAULT:hang\n#### 72"], timeout=30.0, max_retries=10, deadline=0.6)
        client = JudgeClient(srv.base_url, "judge", timeout=30.0, max_retries=10, deadline=0.6, cache_size=0)
        res = asyncio.run(client.complete([{"role": "user", "content": "FAULT:hang"}]))
        assert len(srv.requests) == 2
    assert flags(out) == (1.0, -1.0, 1.0, 0.0, 1.0)
    assert (res.attempts, res.error.kind, res.error.message) == (1, "timeout", "deadline of 0.6s reached")


def test_deadline_counts_queueing():
    """The one slot is taken (by the test, for good): queued calls give up at their deadline without sending a
    request. A deadline that started once the slot is free would wait for ever (the guard: 10 s, then a failure)."""
    with FakeOpenAIServer() as srv:

        async def main():
            client = JudgeClient(srv.base_url, "judge", max_concurrency=1, deadline=0.5, cache_size=0)
            state = await client._state()
            async with state.slots:
                calls = (client.complete([{"role": "user", "content": f"#### 7{i}"}]) for i in range(4))
                results = await asyncio.wait_for(asyncio.gather(*calls), 10)
            await client.aclose()
            return results

        results = asyncio.run(main())
        sent = len(srv.requests)
    assert [(r.attempts, r.error.kind, r.error.message) for r in results] == [
        (0, "timeout", "deadline of 0.5s reached")
    ] * 4
    assert sent == 0


def test_all_failing_server_many_samples_all_fall_back(retry_sleeps):
    """256 samples against a server that always 500s: all fall back, each after 3 attempts and the server's 10 ms
    waits (no pile-up of backoff)."""
    with FakeOpenAIServer(mode="500", **QUICK) as srv:
        # a generous per-call timeout: on a loaded 2-core machine 256 concurrent calls may wait > 0.5 s to be read
        outs = run_batch(srv.base_url, [f"#### {i}" for i in range(256)], cache_size=0, timeout=5.0)
        n = len(srv.requests)
    assert n == 3 * 256 and sum(o["judge_attempts"] for o in outs) == 3 * 256
    assert sum(o["judge_error"] for o in outs) == 256
    assert retry_sleeps == [0.01] * 2 * 256
