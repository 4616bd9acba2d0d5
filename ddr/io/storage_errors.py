"""What the storage libraries raise, as errors that name the location and say what to do.

Used by :meth:`ddr.io.locations.Location.errors`: missing credentials and refused ones
(``PermissionError``), a missing bucket (``FileNotFoundError``), an endpoint that does not
answer within ddr's bounds (``TimeoutError``, saying how long it was waited for:
:mod:`ddr.io.request_bounds`) or refuses connections (``ConnectionError``). Every message is
redacted. (A scheme whose filesystem is not installed is refused by the location itself.)
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, Protocol

from ddr.io.redaction import redact
from ddr.io.request_bounds import StoreNotAnswering

__all__ = ["Where", "endpoint_note", "translate"]


class Where(Protocol):
    """What the messages say of the location an error happened at
    (:class:`ddr.io.locations.Location` is one; this module imports none)."""

    @property
    def url(self) -> str: ...

    @property
    def protocol(self) -> str: ...

    @property
    def storage_options(self) -> Mapping[str, Any]: ...

    def missing_bucket(self) -> str: ...


def endpoint_note(loc: Where) -> str:
    opts = loc.storage_options
    ep = opts.get("endpoint_url") or (opts.get("client_kwargs") or {}).get("endpoint_url")
    if loc.protocol == "s3":
        ep = ep or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return f" (endpoint {ep})" if ep else ""


def _is_timeout(exc: BaseException) -> bool:
    if any(isinstance(e, StoreNotAnswering) for e in _chain(exc)):
        return True
    names = {type(e).__name__ for e in _chain(exc)}
    timeouts = {
        "TimeoutError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ServerTimeoutError",
        "ConnectionTimeoutError",
        "SocketTimeoutError",
        "timeout",
    }
    return bool(names & timeouts) or any(isinstance(e, asyncio.TimeoutError) for e in _chain(exc))


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def translate(loc: Where, action: str, exc: Exception) -> Exception | None:
    names = {type(e).__name__ for e in _chain(exc)}
    detail = redact(str(exc))
    if isinstance(exc, ImportError):
        return None
    if "NoCredentialsError" in names or "PartialCredentialsError" in names:
        return PermissionError(
            f"{loc.url}: no credentials found{endpoint_note(loc)}; set them in the environment "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...) or in "
            "storage_options"
        )
    if _is_timeout(exc):
        waits = next((e.why for e in _chain(exc) if isinstance(e, StoreNotAnswering)), "")
        return TimeoutError(
            f"{loc.url}: the storage endpoint did not answer in time{endpoint_note(loc)} while "
            f"trying to {action}{f' ({waits})' if waits else ''}; check the endpoint URL and "
            "the network"
        )
    if (
        "EndpointConnectionError" in names
        or "ClientConnectorError" in names
        or isinstance(exc, ConnectionError)
    ):
        return ConnectionError(
            f"{loc.url}: could not connect to the storage endpoint{endpoint_note(loc)}: {detail}"
        )
    if isinstance(exc, PermissionError) or ("ClientError" in names and "Forbidden" in detail):
        return PermissionError(
            f"{loc.url}: access denied{endpoint_note(loc)} (wrong or missing credentials, or no "
            f"permission to {action}): {detail}"
        )
    if isinstance(exc, FileNotFoundError) and "bucket" in detail.lower():
        return FileNotFoundError(loc.missing_bucket())
    return None
