"""What a run needs from outside the repository, checked before anything long starts: the judge API's key variable
(``api_key_errors``, in every dry run) and, for a Ray job, the cluster's dashboard answering at ``RAY_ADDRESS``
(``ray_address_error``, before ``ray job submit`` uploads anything). Used by ``scripts/launch/launcher.py`` (no
command of its own):

    from scripts.launch import preflight; errors = preflight.api_key_errors(cfg, env)
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request

DASHBOARD_DEADLINE_S = 5.0  # how long the dashboard may take to answer /api/version


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine (localhost, 127.0.0.0/8, ::1): such an endpoint needs no API key."""
    host = urllib.parse.urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key_errors(cfg, env) -> list[str]:
    """A judge API that is not on this machine (``reward_kwargs.base_url``) with its key variable (``api_key_env``,
    default OPENAI_API_KEY) unset here: the run would load the policy before the first 401. Names the variable,
    never a value; ``api_key_env=null`` declares an endpoint that takes no key."""
    from omegaconf import OmegaConf

    from reward_fns.judge_options import JudgeSettings  # the judge rewards' defaults

    kwargs = OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs", default=None)
    if kwargs is None:
        return []
    kwargs = OmegaConf.to_container(kwargs, resolve=True)
    url = str(kwargs.get("base_url") or "")
    name = kwargs["api_key_env"] if "api_key_env" in kwargs else JudgeSettings.api_key_env
    if not url or not name or is_local(url) or (env.get(name) or "").strip():
        return []
    return [
        f"reward.custom_reward_function.reward_kwargs.api_key_env: the judge API {urllib.parse.urlsplit(url).netloc} "
        f"is not on this machine and {name} is not set: set {name} to its key (or, for an endpoint that takes no "
        "key, ++reward.custom_reward_function.reward_kwargs.api_key_env=null)"
    ]


def dashboard_url(address: str) -> str | None:
    """The HTTP address ``ray job submit`` talks to for ``RAY_ADDRESS`` (``host:port`` -> ``http://host:port``);
    None for an address it resolves otherwise (``auto``, ``ray://``)."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        return None if address == "auto" else f"http://{address}"
    return address if urllib.parse.urlsplit(address).scheme in ("http", "https") else None


def ray_address_error(address: str, deadline_s: float = DASHBOARD_DEADLINE_S) -> str | None:
    """None when a Ray dashboard answers ``GET /api/version`` at ``address`` within ``deadline_s``; else one line
    naming the address and the likely fix (the dashboard's port, 8265, not the GCS port 6379)."""
    url = dashboard_url(address)
    if url is None:
        return None
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=deadline_s) as r:
            json.loads(r.read(65536))
        return None
    except urllib.error.HTTPError as e:
        why = f"HTTP {e.code}"
    except (OSError, ValueError, http.client.HTTPException) as e:  # refused, timed out, not HTTP (GCS), not JSON
        why = str(getattr(e, "reason", None) or e) or type(e).__name__
    host = urllib.parse.urlsplit(url).hostname or "<head>"
    host = f"[{host}]" if ":" in host else host
    return (
        f"RAY_ADDRESS={address}: no Ray dashboard answers at {url}/api/version ({why}); ray job submit needs the "
        f"dashboard's HTTP address, e.g. RAY_ADDRESS=http://{host}:8265 (the dashboard port, not the GCS port 6379), "
        "with the cluster up; nothing was submitted"
    )
