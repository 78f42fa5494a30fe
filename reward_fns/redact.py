"""Masking credentials in judge URLs before anything prints them (the plan, the printed command, a client's repr,
failure log lines). No command of its own:

    >>> mask_url("https://user:pass@judge.example/v1?key=abc&model=m")
    'https://***@judge.example/v1?key=***&model=m'
    >>> mask_url("https://judge.example/sk-proj-abc123def456/v1#access_token=xyz&token_type=bearer")
    'https://judge.example/***/v1#access_token=***&token_type=bearer'
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit

#: a URL in running text: a scheme, then everything up to white space or a quote
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s'\"<>`]*)")
#: parameter names (query or fragment, lower-cased, decoded) whose values are credentials
_SECRET_NAME = re.compile(
    r"key|token|secret|pass|pwd|jwt|sig|auth|credential|code|session|cookie|bearer|(?:^|[^a-z])pw(?:$|[^a-z])"
)
#: path segments that are keys: the usual key prefixes (OpenAI sk-, GitHub ghp_, Hugging Face hf_, AWS AKIA, a JWT's
#: eyJ, Google AIza, Slack xoxb-, GitLab glpat-) ...
_KEY_PREFIX = re.compile(r"(?i:sk|pk|rk|ak|key)[-_]|xox[abprs]-|gh[opsu]_|github_pat_|hf_|glpat-|AKIA|ASIA|AIza|eyJ")
#: ... or a run of 8 or more letters and digits with both in it (``PathTok4242x``, a UUID's ``123e4567``): a token,
#: not a word, a number, an API version (``v1alpha1``) or a model name (short runs: ``Qwen2.5-0.5B``, ``gpt-4o``)
_TOKEN_RUN = re.compile(r"[A-Za-z0-9]{8,}")
_VERSION = re.compile(r"(?i)v\d+(?:alpha|beta)\d*")
#: ``name=value`` parameters outside a full URL (a relative URL, a query string quoted alone)
_PARAM = re.compile(r"([?&;#])([^=&;\s#'\"]+)=([^&;\s#'\"]+)")


def _secret_name(name: str) -> bool:
    name = unquote_plus(name).lower()
    return bool(_SECRET_NAME.search(name)) and not name.endswith("_type")  # token_type=bearer says no secret


def _keyish(segment: str) -> bool:
    """Whether a path segment looks like a key or token (never a word, a number or a dashed model name)."""
    s = unquote_plus(segment)
    if _KEY_PREFIX.match(s) and len(s) >= 12:
        return True
    return any(
        re.search(r"\d", run) and re.search(r"[A-Za-z]", run) and not _VERSION.fullmatch(run)
        for run in _TOKEN_RUN.findall(s)
    )


def _params(text: str) -> str:
    """``a=1&key=2;pw=3`` -> ``a=1&key=***;pw=***``: values of parameters with a secret name masked."""
    parts = re.split(r"([&;])", text)
    for i in range(0, len(parts), 2):
        name, eq, _value = parts[i].partition("=")
        if eq and _secret_name(name):
            parts[i] = f"{name}=***"
    return "".join(parts)


def _first(text: str, chars: str) -> int:
    """The index of the first of ``chars`` in ``text``, else its length."""
    return min((i for i in map(text.find, chars) if i != -1), default=len(text))


def _authority_end(rest: str) -> int:
    """Where the host part of ``rest`` (a URL after ``scheme://``) ends: after its user info, which runs to the last
    ``@`` before the host (a password may hold ``@``) and, when the password holds ``/``, ``?`` or ``#`` (the host
    then seems to have a port that is not a number), past them to the next ``@``."""
    end = _first(rest, "/?#")
    authority = rest[:end]
    if "@" in authority or authority.startswith("[") or ":" not in authority:
        return end
    port, at = authority.rpartition(":")[2], rest.find("@", end)
    if port and not port.isdigit() and at != -1:  # user:pa/ss@host
        return at + 1 + _first(rest[at + 1 :], "/?#")
    return end


def _mask_one(scheme: str, rest: str) -> str:
    end = _authority_end(rest)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    try:
        parts = urlsplit("x://h" + tail)
    except ValueError:  # a malformed URL (e.g. an unclosed [ in it): its parameters are masked below
        return scheme + authority + tail
    path = "/".join("***" if _keyish(seg) else seg for seg in parts.path.split("/"))
    query = "?" + _params(parts.query) if "?" in tail.split("#", 1)[0] else ""
    fragment = ("#" + (_params(parts.fragment) if "=" in parts.fragment else parts.fragment)) if "#" in tail else ""
    return scheme + authority + path + query + fragment


def mask_url(text: str) -> str:
    """``text`` with the credentials of every URL in it masked: user info (up to the last ``@`` before the host),
    values of parameters whose name looks secret (``_SECRET_NAME``) and path segments that look like keys
    (``_keyish``), in a full URL or not (``/v1?key=abc``). Used by every print, repr and error message of a judge
    URL."""
    masked = _URL.sub(lambda m: _mask_one(m.group(1), m.group(2)), str(text))
    return _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}=***" if _secret_name(m.group(2)) else m.group(0), masked)
