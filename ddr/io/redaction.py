"""Secrets out of everything ddr writes or says.

The values of secret-looking keys in ``storage_options`` (``key``, ``secret``, ``token``,
``password``, ``*_key``, ``sas_token``, ``connection_string``, ...) are remembered when a
location is resolved, and so are the values of the standard credential environment
variables; :func:`redact` replaces any of them by ``"***"`` in strings, and the values of
secret keys in any ``storage_options`` mapping it meets. Provenance, run summaries, JSON
outputs, the recorded command line and error messages pass through it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "redact", "redact_options", "remember_secret"]

_SECRET_WORDS = (
    "key",
    "secret",
    "token",
    "password",
    "passwd",
    "credential",
    "sas",
    "signature",
    "connection_string",
    "auth",
    "private",
)
# environment variables whose values are secrets wherever they show up
_SECRET_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
)
REDACTED = "***"

_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def _is_secret_key(name: str) -> bool:
    low = name.lower()
    return any(word in low for word in _SECRET_WORDS)


def remember_secret(value: Any) -> None:
    if isinstance(value, str) and len(value) >= 4:
        with _secrets_lock:
            _secrets.add(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            remember_secret(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            remember_secret(v)


def redact_options(options: Any) -> Any:
    """``storage_options`` (or any mapping) with the values of secret-looking keys replaced
    by ``"***"``, recursively; those values are remembered for :func:`redact`."""
    if isinstance(options, Mapping):
        out = {}
        for k, v in options.items():
            if isinstance(k, str) and _is_secret_key(k) and v not in (None, False, True):
                remember_secret(v)
                out[k] = REDACTED
            else:
                out[k] = redact_options(v)
        return out
    if isinstance(options, list):
        return [redact_options(v) for v in options]
    return options


def redact(value: Any) -> Any:
    """``value`` with every known secret removed: strings have each secret replaced by
    ``"***"``; mappings and lists are redacted recursively (``storage_options`` mappings
    lose the values of their secret keys). Known secrets: values given in
    ``storage_options`` to :func:`resolve` in this process, and the values of the standard
    credential environment variables."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if k == "storage_options":
                out[k] = redact(redact_options(v))
            else:
                out[k] = redact(v)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if not isinstance(value, str):
        return value
    with _secrets_lock:
        known = set(_secrets)
    known.update(v for v in (os.environ.get(n) for n in _SECRET_ENV) if v and len(v) >= 4)
    for secret in sorted(known, key=len, reverse=True):
        if secret in value:
            value = value.replace(secret, REDACTED)
    return value
