"""How long ddr waits for an object store, and what a process remembers of endpoints that
stopped answering.

Every S3 request ddr makes (itself, or through zarr's store on a location ddr opened, in the
client and in the dask workers) is bounded (:mod:`ddr.io.bounded_s3` enforces it):

- a *try* waits at most ``connect_timeout`` (5 s) to connect and ``read_timeout`` (30 s) for
  each part of the answer, and ends in any case after ``connect_timeout + read_timeout``
  (plus 1 s per MiB it sends): sending to a server that stopped reading is bounded too;
- a request that gets no answer (or another error s3fs retries) is tried ``tries`` (5) times
  in all, with s3fs's back-off between tries (0.1 s, growing x1.7: 1.9 s over 5 tries);
- a request whose tries all went unanswered raises :class:`StoreNotAnswering` (which
  :meth:`ddr.io.locations.Location.errors` turns into a ``TimeoutError`` naming the URL), and
  makes its endpoint *silent* in this process for ``read_timeout`` seconds: requests to it
  fail at once, then each gets one try of at most ``connect_timeout`` until one is answered.
  A run that lost its store ends (releasing claims, writing its summary elsewhere) once one
  request has waited its bound, not after a bound per request. The error, received by the
  client from a dask worker, makes the endpoint silent in the client too;
- the requests in flight when their endpoint goes silent, or when Ctrl-C comes
  (:func:`interrupt_requests`), get at most ``connect_timeout`` more and no further try;
  after Ctrl-C, later requests get one try of at most that, none to a silent endpoint.

The bounds come from, in order: the location's ``storage_options`` (``config_kwargs:
{connect_timeout, read_timeout}``, ``tries``), the environment (:data:`ENVIRONMENT`), the
defaults (:data:`DEFAULTS`). The environment is read when a location opens its store; the
resolved bounds travel with a location and its store to the workers.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULTS",
    "ENVIRONMENT",
    "StoreNotAnswering",
    "answered",
    "environment_bounds",
    "clear_interrupt",
    "interrupt_requests",
    "interrupted_at",
    "Silence",
    "make_silent",
    "silence",
]

#: the bounds when nothing else is given
DEFAULTS: dict[str, float] = {"connect_timeout": 5.0, "read_timeout": 30.0, "tries": 5}
#: environment variables that change the defaults, for every S3 location of the process
ENVIRONMENT: dict[str, str] = {
    "connect_timeout": "DDR_S3_CONNECT_TIMEOUT",
    "read_timeout": "DDR_S3_READ_TIMEOUT",
    "tries": "DDR_S3_TRIES",
}

_lock = threading.Lock()
_silent: dict[str, Silence] = {}  # endpoint -> how it went silent
_interrupted: list[float] = []  # when Ctrl-C came (time.monotonic), if it did


class StoreNotAnswering(ConnectionError):
    """An object store endpoint did not answer a request within ddr's bounds.

    A ``ConnectionError`` (an ``OSError``), not a ``TimeoutError``: s3fs retries any
    ``TimeoutError`` a request raises, and the bounds already include the tries. Unpickled
    in another process (the client, from a dask worker), it makes the endpoint silent there
    too (:func:`make_silent`).

    Parameters
    ----------
    message : str
        What was asked of which endpoint, and how long it was waited for.
    why : str
        The waits alone (``"5 tries, each 5 s to connect and 30 s for the answer"``), for
        messages that name the location themselves.
    endpoint : str
        The endpoint's URL ("" when unknown).
    quiet : float
        Seconds the endpoint stays silent.
    """

    def __init__(self, message: str, *, why: str = "", endpoint: str = "", quiet: float = 0):
        super().__init__(message)
        self.why, self.endpoint, self.quiet = why, endpoint, quiet

    def __reduce__(self) -> Any:
        state = {"why": self.why, "endpoint": self.endpoint, "quiet": self.quiet}
        return (_arrived, (type(self), str(self.args[0]) if self.args else "", state))


def _arrived(cls: type[StoreNotAnswering], message: str, state: dict[str, Any]) -> Any:
    """A :class:`StoreNotAnswering` from another process: its endpoint is silent here too."""
    if state.get("endpoint") and state.get("quiet"):
        make_silent(state["endpoint"], float(state["quiet"]), state.get("why", ""))
    return cls(message, **state)


def environment_bounds() -> dict[str, float]:
    """The bounds set in the environment (:data:`ENVIRONMENT`), checked.

    Raises
    ------
    ValueError
        A value that is not a positive number (``tries``: a positive integer).
    """
    found: dict[str, float] = {}
    for key, var in ENVIRONMENT.items():
        text = os.environ.get(var, "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        whole = key != "tries" or value.is_integer()
        if not (math.isfinite(value) and value > 0 and whole):
            kind = "a positive integer" if key == "tries" else "a positive number of seconds"
            raise ValueError(f"{var}={text!r}: expected {kind}")
        found[key] = int(value) if key == "tries" else value
    return found


def interrupt_requests() -> None:
    """Ctrl-C: cut every S3 request of this process short (see the module's notes)."""
    with _lock:
        if not _interrupted:
            _interrupted.append(time.monotonic())


def clear_interrupt() -> None:
    """Give requests their full bounds again after a Ctrl-C this process survived (a run
    interrupted in a notebook or a Python program): called when such a run has released its
    outputs, and when a run starts."""
    with _lock:
        _interrupted.clear()


def interrupted_at() -> float | None:
    """When :func:`interrupt_requests` was called (``time.monotonic``), or None."""
    return _interrupted[0] if _interrupted else None


@dataclass(frozen=True)
class Silence:
    """An endpoint that did not answer a request through all its tries.

    Attributes
    ----------
    since : float
        When it went silent in this process (``time.monotonic``).
    until : float
        Until when requests to it fail at once (then one short try each).
    why : str
        How long the request that made it silent waited (for messages).
    """

    since: float
    until: float
    why: str

    @property
    def left(self) -> float:
        """Seconds it is not asked any more (0 once requests may try again)."""
        return max(self.until - time.monotonic(), 0.0)


def make_silent(endpoint: str, quiet: float, why: str = "") -> None:
    """A request to ``endpoint`` went unanswered through all its tries (``why``: how long
    it waited): requests to it fail at once for ``quiet`` seconds, then get one short try
    each until one is answered."""
    now = time.monotonic()
    with _lock:
        known = _silent.get(endpoint)
        if known is None:
            _silent[endpoint] = Silence(now, now + quiet, why)
        else:
            _silent[endpoint] = Silence(known.since, max(known.until, now + quiet), known.why)


def answered(endpoint: str) -> None:
    """A request to ``endpoint`` was answered: it is not silent (any more)."""
    if endpoint in _silent:
        with _lock:
            _silent.pop(endpoint, None)


def silence(endpoint: str) -> Silence | None:
    """How ``endpoint`` went silent, or None when it answers."""
    return _silent.get(endpoint)
