"""Masking credentials in judge URLs before anything prints them (the plan, the printed command, a client's repr,
failure log lines). No command of its own:

    >>> mask_url("https://user:pass@judge.example/v1?key=abc&model=m")
    'https://***@judge.example/v1?key=***&model=m'
"""

from __future__ import annotations

import re

_URL_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^\s/@]+@")
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&;][^=&\s#]*(?:key|token|secret|passw|sig|auth|credential|code)[^=&\s#]*=)[^&\s#'\"]+"
)


def mask_url(text: str) -> str:
    """``text`` with the credentials of every URL in it masked: ``https://user:pass@host`` -> ``https://***@host``,
    ``?key=abc`` (and ``token``, ``secret``, ``password``, ``sig``, ``auth``, ``credential``, ``code`` params) ->
    ``?key=***``. Used by every print, repr and error message of a judge URL."""
    return _URL_SECRET_PARAM.sub(r"\1***", _URL_USERINFO.sub(r"\1***@", str(text)))
