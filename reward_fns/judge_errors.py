"""What a failed judge call means: the typed ``JudgeError`` an ``openai`` SDK exception becomes, what a caller does
about each kind (``OUTCOMES``), the ``JudgeConfigError`` that stops a run with the likely fix, and error texts free
of secrets. No command of its own; used by ``reward_fns.judge_client`` (``JudgeClient.config_error``),
``reward_fns.llm_judge`` and the evaluators (``scripts.eval.backends``).

``outcome(error)`` says what a caller does about each kind (``OUTCOMES``). Error texts are scrubbed: any piece of 8+
characters of the key, in any case, becomes ``***``; a server's text holding one is withheld.

    >>> scrub_secrets("key sk-abcdefgh12 rejected", ["sk-abcdefgh12"])
    ('key *** rejected', True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

import httpx
import openai

from reward_fns.redact import mask_url


class ReplyRefused(httpx.TransportError):
    """A 2xx reply the transport refused (``kind``: ``too_large`` or ``bad_response``). A transport error:
    the SDK retries it like a dropped connection, then raises ``APIConnectionError`` from it. The reason
    (``detail``, which may quote the server) is kept out of the message: SDKs log their exceptions."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"2xx reply refused: {kind}")
        self.kind, self.detail = kind, detail


#: Every ``JudgeError.kind`` and what a caller does about it.
OUTCOMES = {
    "timeout": "fallback",  # APITimeoutError after the retries, or the call's deadline ran out
    "connection": "fallback",  # APIConnectionError: refused, reset, disconnected, truncated body
    "rate_limited": "fallback",  # RateLimitError (429) after the retries
    "server_error": "fallback",  # InternalServerError (5xx), 408, 409 after the retries
    "bad_response": "fallback",  # a 2xx body that is not a chat completion (malformed JSON, no choices)
    "too_large": "fallback",  # a 2xx body longer than max_response_bytes (reading stopped)
    "config": "stop",  # 401, 403, 404, 405, "model not found": the key, the URL or the model is wrong
    "client_error": "refused",  # any other 4xx: this request was rejected (context length, content filter)
    "unexpected": "refused",  # anything else (a bug)
}
#: SDK status-error classes with a fixed kind; other statuses: see ``error_from``.
_STATUS_CLASSES = (
    (openai.RateLimitError, "rate_limited"),
    (openai.InternalServerError, "server_error"),
    (openai.AuthenticationError, "config"),
    (openai.PermissionDeniedError, "config"),
    (openai.NotFoundError, "config"),
)
#: "The model `x` does not exist", "model_not_found", "Unknown model: x", "no such model" ...
_MODEL_MISSING = re.compile(
    r"model_not_found|(?:unknown|invalid|no such) model|model\b.{0,200}?\b(?:not found|does not "
    r"exist|not exist|is not (?:available|served|supported))",
    re.IGNORECASE | re.DOTALL,
)
#: Shortest piece of a secret that is scrubbed from error texts (shorter secrets: the whole secret).
SECRET_PIECE = 8
_MESSAGE_CHARS = 300
_WITHHELD = "(reply text withheld: it contains part of a secret)"


@dataclass(frozen=True)
class JudgeError:
    """Why a call produced no reply. ``message`` is safe to log (no secrets, bounded length)."""

    kind: str
    message: str
    status: int | None = None

    def __str__(self) -> str:
        return f"{self.kind}{'' if self.status is None else f' (HTTP {self.status})'}: {self.message}"


def throttled(count: int) -> bool:
    """Whether the ``count``-th of a repeated warning is logged: the first five, then every hundredth (a failing
    judge or a stream of short groups is said, not logged thousands of times).

    >>> [n for n in range(1, 301) if throttled(n)]
    [1, 2, 3, 4, 5, 100, 200, 300]
    """
    return count <= 5 or count % 100 == 0


def outcome(error: JudgeError | None) -> str:
    """``"ok"`` (no error), ``"fallback"``, ``"stop"`` or ``"refused"``; see ``OUTCOMES``."""
    return "ok" if error is None else OUTCOMES.get(error.kind, "refused")


class JudgeConfigError(RuntimeError):
    """The endpoint rejected the configuration (key, URL or model): stop the run. ``url`` is scrubbed."""

    def __init__(
        self, message: str, *, url: str | None = None, status: int | None = None, error: JudgeError | None = None
    ):
        super().__init__(message)
        self.url, self.status, self.error = url, status, error


def scrub_secrets(text: str, secrets: Sequence[str]) -> tuple[str, bool]:
    """``text`` with every run of secret pieces replaced by ``***``; and whether anything was found.

    A piece is any substring of a secret at least ``SECRET_PIECE`` (8) characters long (for a
    shorter secret: the whole secret), matched case-insensitively. Linear in ``len(text)``.
    """
    text = str(text)
    low, hidden = text.lower(), [False] * len(text)
    for secret in secrets:
        if isinstance(secret, str) and secret:
            w, sec = min(SECRET_PIECE, len(secret)), secret.lower()
            pieces = {sec[i : i + w] for i in range(len(sec) - w + 1)}
            for i in range(len(low) - w + 1):
                if low[i : i + w] in pieces:
                    hidden[i : i + w] = [True] * w
    if not any(hidden):
        return text, False
    runs = groupby(range(len(text)), hidden.__getitem__)  # touching or overlapping pieces: one ***
    return "".join("***" if h else "".join(text[i] for i in idx) for h, idx in runs), True


def scrub_message(text: str, secrets: Sequence[str]) -> str:
    """Our own message text, with every piece of a secret replaced and URL credentials masked (then cut to 300
    chars)."""
    return mask_url(scrub_secrets(str(text)[: 4 * _MESSAGE_CHARS], secrets)[0])[:_MESSAGE_CHARS]


def _echo(text: str, secrets: Sequence[str]) -> str:
    """Text a server sent: quoted (cut to 300 chars) only when it holds no piece of a secret."""
    head = str(text)[: 4 * _MESSAGE_CHARS]
    return _WITHHELD if scrub_secrets(head, secrets)[1] else head[:_MESSAGE_CHARS]


def error_from(exc: Exception, client) -> JudgeError:
    """The SDK's exception (after its retries) as a ``JudgeError``; see ``OUTCOMES``. ``client``: the
    ``JudgeClient`` that called (its per-attempt timeout is named; its ``secrets()`` are kept out)."""
    secrets = client.secrets()
    if isinstance(exc, openai.APITimeoutError):
        return JudgeError("timeout", f"no reply within timeout={client.timeout}s")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, ReplyRefused):
            return JudgeError(cause.kind, _echo(cause.detail, secrets), 200)
        return JudgeError("connection", scrub_message(f"{type(cause or exc).__name__}: {cause or exc}", secrets))
    if isinstance(exc, openai.APIStatusError):
        status, said = exc.status_code, _echo(exc.response.text, secrets)
        kind = next((k for cls, k in _STATUS_CLASSES if isinstance(exc, cls)), None)
        if kind is None and status in (408, 409):
            kind = "server_error"
        elif kind is None:
            config = status == 405 or (400 <= status < 500 and _MODEL_MISSING.search(said))
            kind = "config" if config else "client_error"
        return JudgeError(kind, said, status)
    return JudgeError("unexpected", scrub_message(f"{type(exc).__name__}: {exc}", secrets))


def config_error(error: JudgeError | None, client) -> JudgeConfigError | None:
    """A ``JudgeConfigError`` naming ``client``'s URL, the status and the likely fix, if ``error`` is one (of the
    key, only whether it is set is said)."""
    if outcome(error) != "stop":
        return None
    url, status, model = scrub_message(client.url, client.secrets()), error.status, client.model
    if client.api_key_env:
        where = "set" if client.key() else "NOT set in this process"
        key_hint = f"the environment variable {client.api_key_env!r} (api_key_env, {where})"
    else:
        key_hint = "api_key_env (None: no key is sent; verl's reward router never gets one)"
    if _MODEL_MISSING.search(error.message):
        fix = (
            f"the model {model!r} is not served at this URL, or rejects a request field (the server's "
            "message says which): check `model` (for a judge served by verl's reward loop, the served name "
            "is the reward model's local path) and extra_body"
        )
    elif status == 401:
        fix = f"the API key was rejected or is missing: check {key_hint}, and that it is exported to the reward workers"
    elif status == 403:
        fix = f"the key may not use this model or endpoint: check {key_hint}, `model` ({model!r}) and base_url"
    else:
        fix = (
            "no chat-completions endpoint at this URL: check base_url (an API base such as "
            "https://api.openai.com/v1 or http://host:port/v1, or the full .../chat/completions URL)"
        )
    said = f" Server said: {error.message}" if error.message else ""
    message = f"judge configuration error: POST {url} answered HTTP {status}. Likely fix: {fix}.{said}"
    return JudgeConfigError(message, url=url, status=status, error=error)
