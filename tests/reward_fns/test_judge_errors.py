"""The judge's errors (``reward_fns/judge_errors.py``): each exception of the ``openai`` SDK (raised after its retries)
as a ``JudgeError`` and an outcome (fallback, stop or refused), checked directly and end to end against the fake
server's injected faults; and no piece of a secret in an error text.

Everything runs against the fake server ``tests.doubles.fake_openai`` on 127.0.0.1 (no network).
"""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import openai
import pytest

from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import OUTCOMES, JudgeError, ReplyRefused, error_from, outcome, scrub_secrets
from tests.doubles.fake_openai import FakeOpenAIServer

QUICK = dict(retry_after_ms="10")  # the test server's 429/5xx replies ask for a retry after 10 ms
KEY_VAR = "VERL_JUDGE_TEST_CONFIG_KEY"


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
    assert error_from(exc, client) == error
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
    ("hang", ("timeout", None, "no reply within timeout=1.0s", 2)),
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
        client = JudgeClient(srv.base_url, "judge", timeout=1.0, max_retries=1, max_response_bytes=2048, cache_size=0)
        res = asyncio.run(client.complete([{"role": "user", "content": f"FAULT:{fault}"}]))
    assert (res.error.kind, res.error.status, res.error.message, res.attempts) == expected
    assert res.text is None and client.stats["requests"] == expected[3]


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
