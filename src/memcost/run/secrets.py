"""Secrets stay in the environment: parameters that carry a credential are refused.

Parameters are recorded verbatim (the manifest, each notebook's metrics, papermill's injected
cell), so a key inside one would be written to disk. :func:`check_secrets` refuses, before any
notebook starts, a ``base_url`` with user info (``http://user:key@host``) or a key-like query
parameter (``?api-key=...``), and an ``api_key_env`` that is not a variable name (a key pasted
where its variable's name belongs); the messages never repeat the secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from memcost.run.presets import PresetError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PREFIX = re.compile(r"^(sk|pk|rk|ghp|xox[a-z])[-_]")
_SECRET_QUERY = re.compile(r"key|token|secret|sig|auth|pass|credential|access", re.IGNORECASE)
HOW = ("keys never go in parameters (they are recorded in the manifest and the executed "
       "notebooks): put the key in an environment variable (or .env) and pass that variable's "
       "name as api_key_env, e.g. -p 'client={api_key_env: MY_PROXY_KEY}'")


def looks_like_key(value: str) -> bool:
    """A key rather than a variable name: not a valid name, a key prefix, or a long mix of
    lower-case letters and digits."""
    if not _ENV_NAME.match(value) or _KEY_PREFIX.match(value):
        return True
    return len(value) >= 24 and bool(re.search(r"[a-z]", value)) and bool(re.search(r"\d", value))


def public_url(url: str) -> str:
    """``url`` without user info and without its query (what may be shown and recorded)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    secret_params = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)
                     if _SECRET_QUERY.search(name)]
    if parts.username or parts.password:
        where = "user info (user:key@host)"
    elif secret_params:
        where = f"the query parameter {secret_params[0]!r}"
    else:
        return
    raise PresetError(f"parameter base_url carries a credential in {where}; refused, nothing "
                      f"ran. Pass base_url={public_url(url)} and the secret through the "
                      f"environment: {HOW}")


def check_api_key_env(value: str) -> None:
    if value and looks_like_key(value):
        raise PresetError("parameter api_key_env holds what looks like a key (not shown), not "
                          f"the name of an environment variable; refused, nothing ran. {HOW}")


def check_secrets(values: Mapping[str, Any]) -> None:
    """Refuse a block of parameters that carries a credential (:class:`PresetError`)."""
    settings = values.get("client") if isinstance(values.get("client"), Mapping) else {}
    if isinstance(settings.get("api_key_env"), str):
        check_api_key_env(settings["api_key_env"])
    if isinstance(values.get("base_url"), str):
        check_base_url(values["base_url"])
