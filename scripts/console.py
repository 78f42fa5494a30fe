"""What the scripts print and the reports they write record: ``say(tag, msg)`` writes ``[tag] msg`` with the values of
secret variables masked (names ending in KEY, TOKEN, SECRET, PASSWORD or CREDENTIALS, those in ``PASS_ENV``, the
judge key variable; ``api_key=VALUE`` inline too); ``masked(record)`` masks every string of a report. No command:

    from scripts.console import say; say("launch", "config OK")
    write_json(path, masked(report))
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse

from reward_fns.redact import mask_url

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
#: secrets a Ray job always gets when they are set (scripts/launch/ray_job.py passes them by name)
DEFAULT_PASS_ENV = ("SWANLAB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "OPENAI_API_KEY")
#: the judge key variable the composed config names (reward_kwargs.api_key_env), kept in the launcher's env dict
KEY_ENV = "_LAUNCH_KEY_ENV"
_INLINE_SECRET = re.compile(r"((?:api_?key|token|secret|password|passwd)[\"']?\s*[=:]\s*[\"']?)([^\s,\"'}\]]+)", re.I)


def secret_names(env) -> list[str]:
    """Variable NAMES whose values a Ray job gets by name and every print masks."""
    names = list(DEFAULT_PASS_ENV) + ([env[KEY_ENV]] if env.get(KEY_ENV) else [])
    names += [n.strip() for n in (env.get("PASS_ENV") or "").split(",") if n.strip()]
    return list(dict.fromkeys(names))


def mask(text: str, env=None) -> str:
    """``text`` with every secret value of ``env`` masked: as written, JSON-escaped, ``repr``-escaped and
    URL-encoded; values of 6 characters or more wherever they stand, shorter ones as whole tokens. Then inline
    ``api_key=VALUE`` and URL credentials (``https://user:pass@host``, ``?key=...``) are masked too."""
    env = os.environ if env is None else env
    names = set(secret_names(env)) | {n for n in env if SECRET_NAME.search(n)}
    forms = set()
    for v in {env[n] for n in names if env.get(n)}:
        forms |= {
            (f, len(v) >= 6)
            for f in (v, json.dumps(v)[1:-1], repr(v)[1:-1], urllib.parse.quote(v, safe=""), urllib.parse.quote_plus(v))
            if f
        }
    for f, anywhere in sorted(forms, key=lambda x: len(x[0]), reverse=True):
        text = re.sub(re.escape(f) if anywhere else rf"(?<![A-Za-z0-9]){re.escape(f)}(?![A-Za-z0-9])", "***", text)
    # `...api_key=VALUE` / `"token": "VALUE"` written inline (but not api_key_env=NAME)
    return mask_url(_INLINE_SECRET.sub(lambda m: m.group(1) + "***", text))


def masked(value, env=None):
    """``value``, a record as a report file keeps it (dicts, lists, strings, numbers), with every string ``mask``ed
    (keys as they are): the commands, overrides and paths a written report records."""
    if isinstance(value, str):
        return mask(value, env)
    if isinstance(value, dict):
        return {k: masked(v, env) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v, env) for v in value]
    return value


def say(tag: str, msg: str = "", env=None, stamp: bool = False) -> None:
    """Print ``[tag] msg`` (``[tag HH:MM:SS]`` with ``stamp``), secrets of ``env`` (default os.environ) masked."""
    head = f"[{tag} {time.strftime('%H:%M:%S')}]" if stamp else f"[{tag}]"
    print(mask(f"{head} {msg}" if msg else "", env), flush=True)
