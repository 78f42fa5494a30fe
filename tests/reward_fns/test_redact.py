"""reward_fns/redact.py: every credential a judge URL can carry is masked, and nothing else is: user info (a password
holding ``@`` or ``/`` too), secret query and fragment parameters, keys in the path; the client's repr, the
failure log line and httpx's request log line print the masked URL."""

from __future__ import annotations

import asyncio
import logging

import pytest

from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import JudgeError
from reward_fns.redact import mask_url
from tests.doubles.fake_openai import FakeOpenAIServer


@pytest.mark.parametrize(
    "text, masked",
    [
        # user info, wholly, up to the last @ before the host
        ("https://user:pass@judge.example/v1", "https://***@judge.example/v1"),
        ("https://user:p@ss@judge.example/v1", "https://***@judge.example/v1"),
        ("https://user:p@s@s@judge.example:8443/v1", "https://***@judge.example:8443/v1"),
        ("https://user:pa/ss@judge.example/v1", "https://***@judge.example/v1"),
        ("https://token@judge.example/v1", "https://***@judge.example/v1"),
        # query parameters with a secret name (any case, inside a longer name too)
        ("https://h/v1?key=abc&model=m", "https://h/v1?key=***&model=m"),
        ("https://h/v1?pw=hunter2&model=m", "https://h/v1?pw=***&model=m"),
        ("https://h/v1?jwt=eyJhbGciOi.e30.sig&x=1", "https://h/v1?jwt=***&x=1"),
        ("https://h/v1?PWD=1&Api-Key=2&x_auth_token=3", "https://h/v1?PWD=***&Api-Key=***&x_auth_token=***"),
        ("https://h/v1?password=a;sig=b&signature=c", "https://h/v1?password=***;sig=***&signature=***"),
        ("https://h/v1?X-Amz-Credential=a&access_token=b", "https://h/v1?X-Amz-Credential=***&access_token=***"),
        ("https://h/v1?client_secret=a&code=b", "https://h/v1?client_secret=***&code=***"),
        # fragment parameters (an OAuth implicit grant), a plain anchor kept
        ("https://h/cb#access_token=abc&token_type=bearer", "https://h/cb#access_token=***&token_type=bearer"),
        ("https://h/docs#section-2", "https://h/docs#section-2"),
        # a token holding a # (unencoded): the fragment's parameter is read whole, not cut at the second #
        ("https://h/cb#access_token=ab#cd&x=1", "https://h/cb#access_token=***&x=1"),
        # keys in the path
        ("https://h/sk-proj-abc123def456/v1", "https://h/***/v1"),
        ("https://h/v1/hf_AbCdEfGhIjKl/chat", "https://h/v1/***/chat"),
        ("https://h/key/AbC123dEf456GhI789jKl0/v1", "https://h/key/***/v1"),
        ("https://h/eyJhbGciOiJIUzI1NiJ9.e30.x/v1", "https://h/***/v1"),
        # a shorter key without a known prefix: a run of 8 or more letters and digits mixing both
        ("https://h/PathTok4242x/v1", "https://h/***/v1"),
        ("https://h/v1/Ab3dEf7h/chat", "https://h/v1/***/chat"),
        ("https://h/123e4567-e89b-12d3-a456-426614174000/v1", "https://h/***/v1"),
        # ... but not an API version, a model or deployment name (runs shorter than 8), or a run of one kind
        ("https://h/v1alpha1/models/gemini-1.5-pro", "https://h/v1alpha1/models/gemini-1.5-pro"),
        ("https://h/openai/deployments/gpt-4o-mini/chat", "https://h/openai/deployments/gpt-4o-mini/chat"),
        ("https://h/v1/models/Meta-Llama-3.1-8B-Instruct", "https://h/v1/models/Meta-Llama-3.1-8B-Instruct"),
        ("https://h/api/completions/20240201/x", "https://h/api/completions/20240201/x"),
        ("https://h/abc1234/v1", "https://h/abc1234/v1"),  # 7: read as a name (a limit)
        # all at once, inside running text and a repr's quotes
        (
            "call to 'https://u:p@w@h:8/sk-live-0123456789ab/v1?pw=1&model=m#jwt=2' failed",
            "call to 'https://***@h:8/***/v1?pw=***&model=m#jwt=***' failed",
        ),
        # nothing to mask: names, numbers, model names, IPv6 hosts, an @ in the path
        ("http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions"),
        (
            "http://h/v1/models/Qwen2.5-0.5B-Instruct?model=m&n=2",
            "http://h/v1/models/Qwen2.5-0.5B-Instruct?model=m&n=2",
        ),
        ("http://[::1]:8000/v1?key=a", "http://[::1]:8000/v1?key=***"),
        ("http://[::1]/v1/models/a@b", "http://[::1]/v1/models/a@b"),
        ("no URL here, key=value", "no URL here, key=value"),
        # outside a full URL: a relative URL's query
        ("POST /v1/chat?api_key=abc ok", "POST /v1/chat?api_key=*** ok"),
        # masking twice changes nothing
        ("https://***@h/***/v1?key=***", "https://***@h/***/v1?key=***"),
    ],
)
def test_mask_url(text, masked):
    assert mask_url(text) == masked


def test_client_repr_and_failure_log_line_mask_the_url(caplog, monkeypatch):
    """The client's repr and the reward's failure log line show the URL masked (password with @, key in the path,
    pw and jwt parameters)."""
    from reward_fns import judge_service

    url = "https://user:p@ss@judge.example/sk-proj-abc123def456/v1?pw=hunter2&jwt=eyJ.e30.s"
    client = JudgeClient(url, "m", api_key_env=None)
    masked = "https://***@judge.example/***/v1/chat/completions?pw=***&jwt=***"
    assert repr(client) == (
        f"JudgeClient(url='{masked}', model='m', api_key_env=None, timeout=60.0, max_retries=4, max_concurrency=64)"
    )
    monkeypatch.setattr(judge_service, "_failures", 0)  # the first failures of a process are logged
    with caplog.at_level(logging.WARNING, logger=judge_service.logger.name):
        judge_service.log_failure(
            judge_service.Answer(None, error=JudgeError("timeout", f"no answer from {client.url}")), client.url, "x"
        )
    (line,) = [r.getMessage() for r in caplog.records]
    assert "hunter2" not in line and "ss@" not in line and "sk-proj" not in line and "eyJ" not in line
    assert line.startswith(f"judge call to {masked} failed (#")


def test_http_request_log_lines_mask_the_url(caplog):
    """With the root logger at INFO, httpx logs every request's URL: a credentialed judge URL (user info, ``?key=``)
    is printed masked, in every record (a local fake server; no network)."""
    caplog.set_level(logging.INFO)
    with FakeOpenAIServer(reply=lambda body: "<score>4</score>") as srv:
        url = srv.base_url.replace("http://", "http://judge:S3cretPass@") + "?key=S3cretKey&model=m"
        client = JudgeClient(url, "m", api_key_env=None, max_retries=0)
        result = asyncio.run(client.complete([{"role": "user", "content": "q"}]))
    assert result.text == "<score>4</score>"
    lines = [r.getMessage() for r in caplog.records]
    assert [line for line in lines if "S3cret" in line] == []
    host = srv.base_url.removeprefix("http://").removesuffix("/v1")
    assert [line for line in lines if line.startswith("HTTP Request")] == [
        f'HTTP Request: POST http://***@{host}/v1/chat/completions?key=***&model=m "HTTP/1.1 200 OK"'
    ]
