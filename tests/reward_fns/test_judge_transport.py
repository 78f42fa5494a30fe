"""The judge client's transport (``reward_fns.judge_client.Transport``): reply bodies read up to ``max_response_bytes``
and never beyond, an over-size reply's connection closed, a 2xx body that is not a chat completion refused; each
refused reply is retried like a dropped connection.

Everything runs against the fake server ``tests.doubles.fake_openai`` on 127.0.0.1 (no network).
"""

from __future__ import annotations

import asyncio

import pytest

from reward_fns.judge_client import JudgeClient
from reward_fns.judge_errors import outcome
from reward_fns.parse import parse_score
from tests.doubles.fake_openai import FakeOpenAIServer
from tests.doubles.fake_replies import Reply

QUICK = dict(retry_after_ms="10")  # the test server's 429/5xx replies ask for a retry after 10 ms


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

        res = asyncio.run(main())
    assert res.attempts == attempts
    if isinstance(expected, int):
        assert res.ok and parse_score(res.text).value == expected
    else:
        assert (res.error.kind, res.error.status, res.error.message) == expected
        # "reading stopped", not a timeout: an endless body read on would end in the 5 s timeout (kind "timeout")
        assert res.text is None


@pytest.mark.parametrize("fault", ["big:3000", "big_chunked:3000"])
@pytest.mark.parametrize("room, ok", [(0, True), (-1, False)], ids=["at_the_cap", "one_byte_over"])
def test_reply_body_cap_is_exact(fault, room, ok):
    """A body of exactly ``max_response_bytes`` is read; one byte more is refused (sized and chunked replies)."""
    import httpx

    with FakeOpenAIServer(**QUICK) as srv:
        ask = {"model": "judge", "messages": [{"role": "user", "content": f"FAULT:{fault}"}]}
        size = len(httpx.post(f"{srv.base_url}/chat/completions", json=ask, timeout=5).content)
        client = JudgeClient(
            srv.base_url, "judge", timeout=5.0, max_retries=0, max_response_bytes=size + room, cache_size=0
        )

        async def main():
            try:
                return await client.complete([{"role": "user", "content": f"FAULT:{fault}"}])
            finally:
                await client.aclose()

        res = asyncio.run(main())
    assert 2900 < size < 3100  # the fake pads its reply to about 3000 bytes
    if ok:
        assert res.ok and parse_score(res.text).value == 4
    else:
        assert (res.error.kind, res.error.message) == (
            "too_large",
            f"reply body over max_response_bytes={size - 1} (reading stopped)",
        )


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


def test_deeply_nested_reply_is_a_transport_failure():
    """B1: a 2xx body nested past Python's JSON recursion limit is a malformed reply: retried, then the fallback."""
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
