"""s3fs with every request bounded: an S3 endpoint that stops answering is an error within a
known time (:mod:`ddr.io.request_bounds` says which), never a hang.

Why s3fs's and botocore's own settings are not enough (measured on a socket that accepts
connections and never answers, and on moto's server stopped with SIGSTOP; 2 s read timeout):

- botocore's ``retries: {max_attempts: 1}`` means one *retry*: 2 attempts per s3fs try;
- s3fs tries every request 5 times (a class attribute, not an option), and a read
  (``_cat_file``) tries its request-and-body 5 times around that: an ``exists()`` made 10
  attempts (with 30 s reads: the 306 s the issue saw), a chunk read 50 (1 500 s);
- aiohttp starts its read timeout only once the request's body is sent, and botocore sends
  ``PutObject`` with ``Expect: 100-continue``: a write to a stopped server waited for the
  "100 Continue" past 60 s whatever ``read_timeout`` said (the issue's runs frozen mid-write).

:class:`BoundedS3FileSystem` keeps botocore to one attempt, makes the tries an option
(``tries``), gives each try a deadline, stops the retries of an outer loop from multiplying
those of a request, and remembers endpoints that went silent.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
)
from fsspec.asyn import sync_wrapper
from s3fs import S3FileSystem
from s3fs.core import _error_wrapper, translate_boto_error

from ddr.io import request_bounds
from ddr.io.request_bounds import DEFAULTS, StoreNotAnswering

__all__ = ["BoundedS3FileSystem"]

logger = logging.getLogger("ddr.io.bounded_s3")

#: the sending speed a try's deadline allows for, beyond connect + read timeouts
SEND_RATE = 2**20  # bytes per second
_POLL = 0.2  # seconds between looks at a try's deadline (an interrupt can shorten it)
# what an unanswered try raises: botocore's, the deadline's (asyncio's) and ddr's own
_NO_ANSWER = (ReadTimeoutError, ConnectTimeoutError, asyncio.TimeoutError, StoreNotAnswering)
# (loop, client) of the asynchronous instances' sessions, closed at exit
_open_sessions: list[tuple[Any, Any]] = []
_sessions_lock = threading.Lock()


class _Stop(StoreNotAnswering):
    """No further try: Ctrl-C came, or the endpoint went silent for another request."""


class BoundedS3FileSystem(S3FileSystem):
    """An ``s3fs.S3FileSystem`` whose requests end within ddr's bounds.

    Parameters
    ----------
    tries : int, default 5
        Tries of a request in all (s3fs's ``retries``), for timeouts, the errors s3fs
        retries (throttling, dropped connections) and the server errors S3 asks clients
        to try again (:data:`TRANSIENT_STATUSES`).
    *args, **kwargs
        As ``s3fs.S3FileSystem``; ``config_kwargs["connect_timeout"]`` and
        ``["read_timeout"]`` bound each try.
    """

    def __init__(self, *args: Any, tries: int = int(DEFAULTS["tries"]), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tries = int(tries)
        self._closed_at_exit: Any = None  # the session closed at exit (asynchronous only)
        # s3fs's loops around a request (a read and its body, a download) try as often
        self.retries = self.tries

    def _timeouts(self) -> tuple[float, float]:
        config = self.config_kwargs
        connect = float(config.get("connect_timeout", DEFAULTS["connect_timeout"]))
        return connect, float(config.get("read_timeout", DEFAULTS["read_timeout"]))

    async def _call_s3(self, method: str, *akwarglist: Any, **kwargs: Any) -> Any:
        """One S3 request (s3fs's ``_call_s3``) within the bounds; when no try is
        answered, :class:`StoreNotAnswering` naming the object, the endpoint and the waits,
        which s3fs's outer loops do not try again."""
        await self.set_session()
        self._close_at_exit()
        s3 = await self.get_s3(kwargs.get("Bucket"))
        call = getattr(s3, method)
        extra = self._get_s3_method_kwargs(call, *akwarglist, **kwargs)
        endpoint, what = str(s3.meta.endpoint_url), _what(method, kwargs)
        connect, read = self._timeouts()
        silent = request_bounds.silence(endpoint)
        hurried = request_bounds.interrupted_at() is not None
        if silent is not None and (silent.left > 0 or hurried):
            raise self._not_asked(what, endpoint, silent, hurried)
        # one try of connect_timeout at most: the endpoint may be back, or the run is ending
        short = "Ctrl-C came" if hurried else "" if silent is None else "it had not answered"
        tries, limit = (1, connect) if short else (self.tries, connect + read)
        attempt = _BoundedTries(call, endpoint, limit, hurry=connect)
        logger.debug("%s on %s: tries %d, each %.3g s at most", what, endpoint, tries, limit)
        started = time.monotonic()
        try:
            out = await _error_wrapper(attempt, kwargs=extra, retries=tries)
        except _Transient as exc:  # every try answered with a server error
            raise translate_boto_error(exc.error) from exc.error
        except _NO_ANSWER as exc:
            why = _waits(attempt.made, time.monotonic() - started, connect, read, short, exc)
            request_bounds.make_silent(endpoint, read, why)
            raise self._not_answering(what, endpoint, why, quiet=read) from exc
        request_bounds.answered(endpoint)
        return out

    def _close_at_exit(self) -> None:
        """Close an asynchronous instance's session (zarr's store) at exit, on the loop it
        runs on: s3fs does it for blocking instances only, and aiohttp then complains of an
        unclosed session when the process ends."""
        creator = getattr(self, "_s3creator", None)
        if not self.asynchronous or creator is None or self._closed_at_exit is creator:
            return
        self._closed_at_exit = creator
        with _sessions_lock:
            if not _open_sessions:
                # registered after zarr's own exit handler, so it runs first: zarr closes
                # the loop these sessions live on
                atexit.register(_close_sessions)
            _open_sessions.append((asyncio.get_running_loop(), creator))

    # s3fs binds its blocking call_s3 to its own _call_s3 (fsspec mirrors the other methods
    # by name): ddr's claims call it directly
    call_s3 = sync_wrapper(_call_s3)

    @classmethod
    def _not_asked(
        cls, what: str, endpoint: str, silent: request_bounds.Silence, hurried: bool
    ) -> Exception:
        """The error of a request not made: its endpoint went silent for an earlier one."""
        ago = time.monotonic() - silent.since
        why = f"not asked: it did not answer a request {ago:.1f} s ago"
        why += f" ({silent.why})" if silent.why else ""
        why += ", and Ctrl-C came" if hurried else f"; asked again in {silent.left:.1f} s"
        return cls._not_answering(what, endpoint, why, quiet=silent.left)

    @staticmethod
    def _not_answering(what: str, endpoint: str, why: str, *, quiet: float) -> Exception:
        return StoreNotAnswering(
            f"{what}: the S3 endpoint {endpoint} did not answer ({why}); check the endpoint "
            "and the network (the bounds: storage_options config_kwargs and tries, or "
            "DDR_S3_CONNECT_TIMEOUT, DDR_S3_READ_TIMEOUT, DDR_S3_TRIES)",
            why=why,
            endpoint=endpoint,
            quiet=quiet,
        )


def _close_sessions() -> None:
    """At exit: close the sessions of asynchronous instances (see ``_close_at_exit``)."""
    with _sessions_lock:
        found = list(_open_sessions)
        _open_sessions.clear()
    for loop, creator in found:
        S3FileSystem.close_session(loop, creator)


class _BoundedTries:
    """Each call is one try of ``call``, ended after ``limit`` seconds (plus the time to
    send its body at :data:`SEND_RATE`), or ``hurry`` seconds after Ctrl-C came or the
    endpoint went silent (for another request), after which no try is made."""

    def __init__(self, call: Any, endpoint: str, limit: float, *, hurry: float) -> None:
        self.call, self.endpoint, self.limit, self.hurry = call, endpoint, limit, hurry
        self.made = 0
        self.begun = time.monotonic()

    async def __call__(self, **kwargs: Any) -> Any:
        if self.made and self._cut_since() is not None:
            raise _Stop("no further try")
        self.made += 1
        start = time.monotonic()
        deadline = start + self.limit + _body_size(kwargs.get("Body")) / SEND_RATE
        task = asyncio.ensure_future(self.call(**kwargs))
        try:
            while True:
                end = self._shortened(deadline)
                left = end - time.monotonic()
                if left <= 0:
                    raise ReadTimeoutError(endpoint_url=self.endpoint)
                done, _ = await asyncio.wait({task}, timeout=min(left, _POLL))
                if done:
                    return _result(task)
        finally:
            if not task.done():
                task.cancel()

    def _shortened(self, deadline: float) -> float:
        """The deadline, cut to ``hurry`` seconds after Ctrl-C or the endpoint's silence."""
        since = self._cut_since()
        return deadline if since is None else min(deadline, since + self.hurry)

    def _cut_since(self) -> float | None:
        """Since when this request is cut short (time.monotonic): Ctrl-C (from the
        request's start when it came before), or its endpoint went silent after it began;
        None when it is not."""
        found = []
        interrupted = request_bounds.interrupted_at()
        if interrupted is not None:
            found.append(max(interrupted, self.begun))
        silent = request_bounds.silence(self.endpoint)
        if silent is not None and silent.since >= self.begun:
            found.append(silent.since)
        return min(found) if found else None


#: statuses of an S3 error that S3 asks clients to try again (500 InternalError, 503
#: SlowDown or ServiceUnavailable, and a gateway's 502 and 504). botocore would; ddr keeps
#: botocore to one attempt (the tries are s3fs's, bounded here), and s3fs tries none of them
#: again: one such answer, which S3 gives now and then, would end a run
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})


class _Transient(HTTPClientError):
    """A server error to try again, as an error s3fs tries again; ``error`` (the server's
    answer) is what is raised when no try is left."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(error=error)
        self.error = error


def _result(task: asyncio.Future) -> Any:
    try:
        return task.result()
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in TRANSIENT_STATUSES:
            raise _Transient(exc) from exc
        raise


def _body_size(body: Any) -> int:
    try:
        return len(body) if body is not None else 0
    except TypeError:  # a file object: its size is not known here
        return 0


def _what(method: str, kwargs: dict[str, Any]) -> str:
    """``"GetObject s3://bucket/key"`` for messages."""
    name = "".join(part.title() for part in method.split("_"))
    bucket, key = kwargs.get("Bucket"), kwargs.get("Key") or kwargs.get("Prefix") or ""
    where = f"s3://{bucket}/{key}".rstrip("/") if bucket else "S3"
    return f"{name} {where}"


def _waits(
    made: int, waited: float, connect: float, read: float, short: str, exc: BaseException
) -> str:
    """How long a request that got no answer was waited for."""
    tries = "1 try" if made == 1 else f"{made} tries"
    if isinstance(exc, _Stop):
        cut = "Ctrl-C came" if request_bounds.interrupted_at() else "another went unanswered"
        return f"{tries}, cut short as {cut}; {waited:.1f} s in all"
    if short:
        return f"1 try of {connect:g} s, as {short}"
    each = f"{connect:g} s to connect and {read:g} s for the answer"
    return f"{tries}, each {each}; {waited:.1f} s in all"
