"""Judge failures that cannot be gamed, the SDK's exceptions mapped to a fallback or a stop, configuration
errors that stop a run, bounded reply bodies, and secrets kept out of error texts.

Everything runs against the fake server ``scripts.serve.fake_openai`` on 127.0.0.1 (no network).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

import httpx
import openai
import pytest

from reward_fns import llm_judge
from reward_fns.judge_client import (
    OUTCOMES,
    JudgeClient,
    JudgeConfigError,
    JudgeError,
    ReplyRefused,
    chat_completions_url,
    outcome,
    scrub_secrets,
)
from reward_fns.llm_judge import KEYS, compute_score
from reward_fns.parse import parse_score
from scripts.serve.fake_openai import FakeOpenAIServer

INFO = {"question": "What is 6 * 12?", "answer": "6 * 12 = 72\n#### 72"}
FAST = dict(timeout=0.3, max_retries=1, max_response_bytes=2048, canary_every=0)
QUICK = dict(retry_after_ms="10")  # the test server's 429/5xx replies ask for a retry after 10 ms
RIGHT, WRONG = "#### 72", "#### 96"


@pytest.fixture(autouse=True)
def _fresh_clients():
    llm_judge._CLIENTS.clear()
    yield
    llm_judge._CLIENTS.clear()


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
KEY_VAR = "VERL_JUDGE_TEST_CONFIG_KEY"
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
            f"the API key was rejected or is missing: check the environment variable '{KEY_VAR}' (api_key_env, set), and "
            "that it is exported to the reward workers",
            '{"error": {"message": "invalid api key"}}',
            20,
        ),
        "403": (
            dict(mode="403"),
            dict(api_key_env=KEY_VAR),
            "sk-some-0000",
            "/v1",
            403,
            f"the key may not use this model or endpoint: check the environment variable '{KEY_VAR}' (api_key_env, set), "
            "`model` ('judge') and base_url",
            '{"error": {"message": "forbidden"}}',
            20,
        ),
        "404 model": (
            dict(expect_model="judge-v2"),
            {},
            None,
            "/v1",
            404,
            "the model 'judge' is not served at this URL, or rejects a request field (the server's message says which): "
            "check `model` (for a judge served by verl's reward loop, the served name is the reward model's local path) "
            "and extra_body",
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


# ----------------------------------------------------------------------------- the SDK's exceptions -> outcome
REQUEST = httpx.Request("POST", "http://judge/v1/chat/completions")


def _status(cls, status, body=b'{"error": {"message": "x"}}'):
    return cls("x", response=httpx.Response(status, request=REQUEST, content=body), body=None)


def _connection(cause):
    error = openai.APIConnectionError(request=REQUEST)
    error.__cause__ = cause  # as the SDK raises it: `raise APIConnectionError(...) from err`
    return error


X = '{"error": {"message": "x"}}'
# (what the SDK raises after its retries, the JudgeError it becomes, the outcome)
SDK_ERRORS = [
    (openai.APITimeoutError(request=REQUEST), JudgeError("timeout", "no reply within timeout=5.0s"), "fallback"),
    (
        _connection(httpx.ConnectError("All connection attempts failed")),
        JudgeError("connection", "ConnectError: All connection attempts failed"),
        "fallback",
    ),
    (_connection(ReplyRefused("too_large", "over")), JudgeError("too_large", "over", 200), "fallback"),
    (
        _connection(ReplyRefused("bad_response", "reply has no choices")),
        JudgeError("bad_response", "reply has no choices", 200),
        "fallback",
    ),
    (_status(openai.RateLimitError, 429), JudgeError("rate_limited", X, 429), "fallback"),
    (_status(openai.InternalServerError, 500), JudgeError("server_error", X, 500), "fallback"),
    (
        _status(openai.InternalServerError, 503, b"model not found"),
        JudgeError("server_error", "model not found", 503),
        "fallback",
    ),
    (_status(openai.APIStatusError, 408), JudgeError("server_error", X, 408), "fallback"),
    (_status(openai.ConflictError, 409), JudgeError("server_error", X, 409), "fallback"),
    (_status(openai.AuthenticationError, 401), JudgeError("config", X, 401), "stop"),
    (_status(openai.PermissionDeniedError, 403), JudgeError("config", X, 403), "stop"),
    (_status(openai.NotFoundError, 404), JudgeError("config", X, 404), "stop"),
    (_status(openai.APIStatusError, 405), JudgeError("config", X, 405), "stop"),
    (
        _status(openai.BadRequestError, 400, b'{"error": {"code": "model_not_found"}}'),
        JudgeError("config", '{"error": {"code": "model_not_found"}}', 400),
        "stop",
    ),
    (
        _status(openai.UnprocessableEntityError, 422, b"The model `judge` does not exist."),
        JudgeError("config", "The model `judge` does not exist.", 422),
        "stop",
    ),
    (
        _status(openai.BadRequestError, 400, b"Unknown model: judge"),
        JudgeError("config", "Unknown model: judge", 400),
        "stop",
    ),
    (
        _status(openai.BadRequestError, 400, b"This model's maximum context length is 4096 tokens"),
        JudgeError("client_error", "This model's maximum context length is 4096 tokens", 400),
        "refused",
    ),
    (
        _status(openai.BadRequestError, 400, b"content filtered"),
        JudgeError("client_error", "content filtered", 400),
        "refused",
    ),
    (_status(openai.APIStatusError, 413), JudgeError("client_error", X, 413), "refused"),
    (_status(openai.UnprocessableEntityError, 422), JudgeError("client_error", X, 422), "refused"),
    (ValueError("boom"), JudgeError("unexpected", "ValueError: boom"), "refused"),
]


@pytest.mark.parametrize(
    "exc,error,expected", SDK_ERRORS, ids=[f"{type(e).__name__}-{i}" for i, (e, _, _) in enumerate(SDK_ERRORS)]
)
def test_sdk_exception_mapping(exc, error, expected):
    client = JudgeClient("http://judge/v1", "judge", timeout=5.0)
    assert client.error_from(exc) == error
    assert outcome(error) == OUTCOMES[error.kind] == expected
    assert (client.config_error(error) is None) is (expected != "stop")


def test_outcomes():
    assert outcome(None) == "ok"
    assert {k for k, v in OUTCOMES.items() if v == "fallback"} == {
        "timeout",
        "connection",
        "rate_limited",
        "server_error",
        "bad_response",
        "too_large",
    }
    assert {k for k, v in OUTCOMES.items() if v == "stop"} == {"config"}
    assert {k for k, v in OUTCOMES.items() if v == "refused"} == {"client_error", "unexpected"}


OK = '{"error": {"message": "%s"}}'
# the same, end to end: test-server fault -> (kind, status, message, attempts) with max_retries=1
FAULT_ERRORS = [
    ("hang", ("timeout", None, "no reply within timeout=0.3s", 2)),
    ("drop", ("connection", None, "RemoteProtocolError: Server disconnected without sending a response.", 2)),
    ("429", ("rate_limited", 429, '{"error": {"message": "Rate limit reached", "type": "rate_limit"}}', 2)),
    ("500", ("server_error", 500, OK % "internal error", 2)),
    ("503", ("server_error", 503, OK % "internal error", 2)),
    ("malformed_json", ("bad_response", 200, "malformed JSON (JSONDecodeError, 50 bytes)", 2)),
    ("no_choices", ("bad_response", 200, "reply has no choices", 2)),
    ("big:5000", ("too_large", 200, "reply body over max_response_bytes=2048 (reading stopped)", 2)),
    ("401", ("config", 401, OK % "invalid api key", 1)),
    ("403", ("config", 403, OK % "forbidden", 1)),
    ("404", ("config", 404, OK % "not found", 1)),
    ("400", ("client_error", 400, OK % "bad request", 1)),
    ("413", ("client_error", 413, OK % "request too large", 1)),
    ("422", ("client_error", 422, OK % "unprocessable request", 1)),
]


@pytest.mark.parametrize("fault,expected", FAULT_ERRORS, ids=[f for f, _ in FAULT_ERRORS])
def test_fault_to_error(fault, expected):
    with FakeOpenAIServer(**QUICK) as srv:
        client = JudgeClient(srv.base_url, "judge", timeout=0.3, max_retries=1, max_response_bytes=2048, cache_size=0)
        (res,) = client.run_batch([[{"role": "user", "content": f"FAULT:{fault}"}]])
    assert (res.error.kind, res.error.status, res.error.message, res.attempts) == expected
    assert res.text is None and client.stats["requests"] == expected[3]


# ----------------------------------------------------------------------------- bounded reply bodies
CAP = 4096
# (fault, max_response_bytes, expected (kind, status, message) or the verdict of a good reply, attempts)
BODY_TABLE = [
    ("big:3000", CAP, 4, 1),
    ("big:10000", CAP, ("too_large", 200, f"reply body over max_response_bytes={CAP} (reading stopped)"), 2),
    ("big_chunked:10000", CAP, ("too_large", 200, f"reply body over max_response_bytes={CAP} (reading stopped)"), 2),
    ("endless", CAP, ("too_large", 200, f"reply body over max_response_bytes={CAP} (reading stopped)"), 2),
    ("big:10000x1", CAP, 1, 2),  # over-size is retried like a transport error (then the usual reply: 1)
    ("big:10000", 1 << 20, 4, 1),
    ("big_chunked:10000", 1 << 20, 4, 1),
    ("big_error:10000", CAP, ("server_error", 503, "e" * 300), 2),  # an error body is cut at the cap
]


@pytest.mark.parametrize("fault,cap,expected,attempts", BODY_TABLE, ids=[f"{f}-{c}" for f, c, _, _ in BODY_TABLE])
def test_reply_body_is_capped(fault, cap, expected, attempts):
    with FakeOpenAIServer(**QUICK) as srv:
        client = JudgeClient(srv.base_url, "judge", timeout=5.0, max_retries=1, max_response_bytes=cap, cache_size=0)

        async def main():
            try:
                return await client.complete([{"role": "user", "content": f"FAULT:{fault}"}])
            finally:
                await client.aclose()

        t0 = time.monotonic()
        res = asyncio.run(main())
        wall = time.monotonic() - t0
    assert res.attempts == attempts
    if isinstance(expected, int):
        assert res.ok and parse_score(res.text).value == expected
    else:
        assert (res.error.kind, res.error.status, res.error.message) == expected
        assert res.text is None
    assert wall < 2.5, wall  # an endless body is not read until the 5 s timeout


def test_oversize_reply_closes_its_connection():
    """Reading stops at the cap and that connection is dropped; a reply within the cap keeps its connection."""
    with FakeOpenAIServer() as srv:
        client = JudgeClient(srv.base_url, "judge", max_retries=1, max_response_bytes=CAP, cache_size=0)

        async def main():
            return [
                await client.complete([{"role": "user", "content": f"FAULT:{f}"}])
                for f in ("big_chunked:10000x1", "big:3000")
            ]

        results = asyncio.run(main())
        peers = [r.peer for r in srv.requests]
    assert [(r.ok, r.attempts) for r in results] == [(True, 2), (True, 1)]
    assert peers[0] != peers[1] == peers[2]  # over-size: closed, the retry opened another, then kept for the next


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


# ----------------------------------------------------------------------------- secrets in error texts
KEY = "sk-" + "test-SECRET123456-abcdefghij"  # fake, assembled so secret scanners do not flag it

# (text, scrubbed, found): any piece of the key of 8+ characters, in any case, becomes ***
SCRUB_TABLE = [
    (f"bad key {KEY[:20]}****", "bad key *******", True),  # a server echoing the key's first 20 characters
    (KEY, "***", True),
    (f"x{KEY[3:15]}y", "x***y", True),  # a middle piece
    (f"[{KEY[-9:]}]", "[***]", True),  # a suffix
    (KEY.upper(), "***", True),
    (f"{KEY[:10]} and {KEY[12:22]}", "*** and ***", True),
    (f"{KEY[:8]}", "***", True),  # 8 characters: a piece
    (f"{KEY[:7]}", KEY[:7], False),  # 7: not a piece
    (f"{KEY[9:16]}!", f"{KEY[9:16]}!", False),
    ("no secret here", "no secret here", False),
    ("", "", False),
]


@pytest.mark.parametrize("text,scrubbed,found", SCRUB_TABLE, ids=range(len(SCRUB_TABLE)))
def test_scrub_secrets(text, scrubbed, found):
    assert scrub_secrets(text, [KEY]) == (scrubbed, found)


def test_scrub_secrets_short_secret_and_several():
    assert scrub_secrets("a abc123 b", ["abc123"]) == ("a *** b", True)  # shorter than 8: the whole secret
    assert scrub_secrets("a abc12 b", ["abc123"]) == ("a abc12 b", False)
    assert scrub_secrets("h-value-1234 k-value-5678", ["h-value-1234", "k-value-5678"]) == ("*** ***", True)


WITHHELD = "(reply text withheld: it contains part of a secret)"
# (status, body the server sends, expected (kind, message)) with max_retries=0
ECHO_TABLE = [
    (
        400,
        json.dumps({"error": {"message": f"Incorrect API key provided: {KEY[:20]}****"}}),
        ("client_error", WITHHELD),
    ),
    (500, f"upstream rejected ...{KEY[10:22]}...", ("server_error", WITHHELD)),
    (429, f"slow down {KEY.upper()}", ("rate_limited", WITHHELD)),
    (200, json.dumps({"error": {"message": f"key {KEY[-12:]} revoked"}}), ("bad_response", WITHHELD)),
    (
        400,
        json.dumps({"error": {"message": f"Incorrect API key provided: {KEY[:7]}****"}}),
        ("client_error", '{"error": {"message": "Incorrect API key provided: ' + KEY[:7] + '****"}}'),
    ),
    (200, json.dumps({"error": {"message": "overloaded"}}), ("bad_response", "reply has no choices: overloaded")),
]


@pytest.mark.parametrize("status,body,expected", ECHO_TABLE, ids=range(len(ECHO_TABLE)))
def test_no_piece_of_the_key_is_echoed(status, body, expected, monkeypatch, caplog):
    monkeypatch.setenv(KEY_VAR, KEY)
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer() as srv:
        client = JudgeClient(srv.base_url, "judge", api_key_env=KEY_VAR, max_retries=0, cache_size=0)
        srv.push((status, body.encode()))

        async def main():
            try:
                return await client.complete([{"role": "user", "content": "hi"}])
            finally:
                await client.aclose()

        res = asyncio.run(main())
        assert srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert (res.error.kind, res.error.message) == expected
    for text in (str(res.error), repr(res), repr(client), caplog.text):
        assert scrub_secrets(text, [KEY])[1] is False, text


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


def test_deeply_nested_reply_is_a_transport_failure():
    """B1: a 2xx body nested past Python's JSON recursion limit is a malformed reply: retried, then the fallback."""
    from scripts.serve.fake_openai import Reply

    deep = b"[" * 50_000 + b"]" * 50_000
    with FakeOpenAIServer(reply=lambda body: Reply(raw=deep)) as srv:
        client = JudgeClient(
            srv.base_url, "judge", timeout=5.0, max_retries=1, max_response_bytes=1 << 20, cache_size=0
        )
        result = asyncio.run(client.complete([{"role": "user", "content": "hi"}]))
    assert (result.error.kind, result.error.status, result.attempts) == ("bad_response", 200, 2)
    assert (
        result.error.message == "malformed JSON (RecursionError, 100000 bytes)" and outcome(result.error) == "fallback"
    )
