"""Runs own their outputs: one claim per output, taken atomically, kept alive by a heartbeat,
checked before every write, released when the run ends.

A claim is a small JSON record beside its output, ``<output>.ddr-claim``
(:mod:`ddr.io.claim_files` keeps it): the run's id, the host and process that hold it, since
when, a heartbeat (the holder's clock, renewed every quarter of the claim's ``timeout``) and
a token, unique to the claim. The token is also written into the output's metadata
(:data:`CLAIM_ATTR`), so that an output rewritten by another run is told apart from one's own.

- Taking a claim is an exclusive create (``O_EXCL`` locally, ``If-None-Match: *`` on S3): of
  two runs, one gets it.
- A claim another run holds is refused, naming that run, or waited for (``wait``).
- A stale claim (its process is gone on this host, or its heartbeat is older than its
  timeout) is taken over by replacing it only if it is still the record judged stale (under
  an exclusive lock locally, ``If-Match`` on S3): of two takers, one gets it. The takeover is
  logged.
- Every write into the output is made inside the claim's fence (:meth:`ClaimRef.fence`,
  :class:`ddr.io.claimed_store.ClaimedStore`): once another run took the output over, the
  writes of this one stop with :class:`ClaimLost`. Locally the fence is a shared lock that a
  takeover waits for; on object stores a write checks the claim at most :attr:`Claim.ttl`
  seconds before it is made, and a takeover waits :attr:`Claim.grace` seconds before writing
  anything, so that writes of the old holder in flight have ended.
- Releasing deletes the record if it is still one's own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ddr.io.claim_files import (
    CLAIM_SUFFIX,
    HOST,
    ClaimLost,
    ClaimRecord,
    LockHeld,
    claim_file,
    claim_location,
    lost_message,
    now_iso,
    process_started,
)
from ddr.io.locations import Location, redact

__all__ = [
    "CLAIM_ATTR",
    "CLAIM_SUFFIX",
    "Claim",
    "ClaimError",
    "ClaimLost",
    "ClaimRecord",
    "ClaimRef",
    "OutputClaims",
    "claim_location",
]

logger = logging.getLogger("ddr.io.claims")

#: the output attribute that holds the token of the claim it was written under
CLAIM_ATTR = "ddr:claim"


class ClaimError(RuntimeError):
    """Another run holds the output (this run refused, or waited for it too long)."""


# ------------------------------------------------------------------------- refs
@dataclass(frozen=True)
class ClaimRef:
    """What a writer (the driver or a dask worker) needs to check a claim: small and
    picklable.

    Attributes
    ----------
    location : Location
        The claim record.
    token : str
        The token of the claim the writes are made under.
    ttl : float
        Object stores: seconds a check stays good in a process (local files are checked
        under their lock at every write).
    """

    location: Location
    token: str
    ttl: float

    @contextlib.contextmanager
    def fence(self) -> Iterator[None]:
        """Hold while writing into the output: raise :class:`ClaimLost` unless the claim
        is still this one."""
        with claim_file(self.location).fence(self.token, self.ttl):
            yield


# ------------------------------------------------------------------------ claim
class Claim:
    """This run's claim on one output.

    Parameters
    ----------
    output : Location
        The output the claim is for.
    run : str
        The run's id (shown to other runs).
    timeout : float
        Seconds without a heartbeat after which the claim may be taken over.
    command : str
        What the run is (shown to other runs; secrets redacted).
    """

    def __init__(self, output: Location, run: str, timeout: float, command: str = "") -> None:
        self.output = output
        self.location = claim_location(output)
        self.run = run
        self.timeout = float(timeout)
        self.command = redact(command)
        self.token = uuid.uuid4().hex
        self.record: ClaimRecord | None = None
        self.version: str | None = None
        self.took_over: str | None = None  # the run whose stale claim this one replaced
        #: (monotonic clock) when the old holder's writes in flight have ended after a
        #: takeover; before it this run does not write
        self.settled_at = 0.0
        # a takeover waits for the old holder's writes in flight at most one timeout more
        self._file = claim_file(self.location, lock_limit=self.timeout)

    @property
    def ttl(self) -> float:
        """Object stores: how long a worker's check of the claim stays good."""
        return min(2.0, self.timeout / 8)

    @property
    def grace(self) -> float:
        """Seconds a takeover waits before writing (0 where writes are fenced by a lock)."""
        return 2 * self.ttl + 2.0 if self._file.needs_grace else 0.0

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.location, self.token, self.ttl)

    def _new_record(self) -> ClaimRecord:
        pid = os.getpid()
        since = self.record.since if self.record is not None else now_iso()
        return ClaimRecord(
            self.output.url,
            self.run,
            self.token,
            HOST,
            pid,
            process_started(pid) or 0.0,
            since,
            time.time(),
            self.timeout,
            self.command,
        )

    # ------------------------------------------------------------------ taking
    def try_acquire(self, *, settle: bool = True) -> ClaimRecord | None:
        """Take the claim if it is free or stale (a takeover is logged); else return the
        record of the run that holds it.

        A takeover on a store without locks (S3) must let the old holder's writes in flight
        end (:attr:`grace`) before this run writes: with ``settle`` it waits here, else it
        records until when in :attr:`settled_at` (:class:`OutputClaims` waits once for all
        its takeovers).

        A claim file that cannot be read as a record (empty, as a full disk leaves one, or
        not a claim) is taken for one being created by another run for at most
        :attr:`UNREADABLE_AFTER` seconds, then for a stale one.
        """
        unreadable_since: float | None = None
        while True:
            mine = self._new_record()
            version = self._file.create(mine.to_bytes())
            if version is not None:
                self.record, self.version = mine, version
                return None
            other, version = self._file.read()
            if version is None:  # released meanwhile
                unreadable_since = None
                continue
            if other is None:
                now = time.monotonic()
                if unreadable_since is None:
                    unreadable_since = now
                if now - unreadable_since < self.UNREADABLE_AFTER:
                    time.sleep(0.05)  # being created by another run
                    continue
                why = (
                    f"it has not been a readable claim record for {self.UNREADABLE_AFTER:g} s "
                    "(an empty or damaged file, as a full disk or a crash while it was "
                    "created leaves)"
                )
                if self._take_over(mine, version, "an unreadable claim", why, settle):
                    return None
                unreadable_since = None
                continue
            unreadable_since = None
            why = other.stale()
            if why is None:
                return other
            if self._take_over(mine, version, other.describe(), why, settle):
                self.took_over = other.run
                return None

    #: seconds a claim file that is not a readable record is waited for (its creator writes
    #: it at once) before it is taken for stale
    UNREADABLE_AFTER = 5.0

    def _take_over(
        self, mine: ClaimRecord, version: str, whose: str, why: str, settle: bool
    ) -> bool:
        """Replace the claim at ``version`` by ``mine``; False if another run did first."""
        try:
            new_version = self._file.replace(mine.to_bytes(), version)
        except LockHeld as exc:
            raise ClaimError(
                f"the claim of {self.output.shown} went stale ({whose}: {why}), but it "
                f"cannot be taken over: {exc}"
            ) from None
        if new_version is None:
            return False
        self.record, self.version = mine, new_version
        logger.warning("taking over %s from %s: %s", self.output.shown, whose, why)
        # writes of the other run that checked its claim just before are done by then
        self.settled_at = time.monotonic() + self.grace
        if settle and self.grace:
            time.sleep(self.grace)
        return True

    # -------------------------------------------------------------- keeping
    def heartbeat(self) -> bool:
        """Renew the heartbeat; False (and an error logged) if the claim was lost."""
        if self.version is None:
            return False
        mine = self._new_record()
        version = self._file.touch(mine.to_bytes(), self.version)
        if version is None:
            other, _ = self._file.read()
            logger.warning("%s", lost_message(self.location, other))
            self.version = None
            return False
        self.record, self.version = mine, version
        return True

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold while the driver writes into the output (a fresh check each time)."""
        with self._file.fence(self.token, 0.0):
            yield

    def release(self) -> None:
        """Delete the record if it is still this claim's."""
        if self.version is None:
            return
        version, self.version = self.version, None
        try:
            self._file.delete(version)
        except OSError as exc:
            logger.warning("could not release the claim %s: %s", self.location.shown, exc)


# ------------------------------------------------------------------- one run's claims
class OutputClaims:
    """The claims of one run on every output it writes: taken one by one in a fixed order
    (two runs that wait for each other's outputs cannot both wait forever), kept alive by one
    heartbeat thread, released together (``with``: also on failure and Ctrl-C).

    Parameters
    ----------
    outputs : iterable of Location
        The outputs the run writes.
    timeout : float
        Seconds without a heartbeat after which another run may take a claim over; the
        heartbeat comes every quarter of it.
    wait : bool or float
        An output another run holds: refuse (False), wait until it is released or goes
        stale (True), or wait at most this many seconds.
    command : str
        Shown to other runs (secrets redacted).

    Attributes
    ----------
    run : str
        This run's id, as other runs see it.
    waited : bool
        Whether taking the claims waited for another run (what was planned may have
        changed meanwhile).
    """

    #: seconds between two looks at a claim another run holds
    POLL = 1.0
    #: seconds between two reports while waiting
    REPORT_EVERY = 10.0

    def __init__(
        self,
        outputs: Any,
        *,
        timeout: float = 120.0,
        wait: bool | float = False,
        command: str = "",
    ) -> None:
        self.run = uuid.uuid4().hex[:12]
        self.timeout = float(timeout)
        self.wait = wait
        unique = {loc.url: loc for loc in outputs}
        self.claims = [Claim(unique[u], self.run, timeout, command) for u in sorted(unique)]
        self.waited = False
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._beating, name="ddr-claims", daemon=True)

    def get(self, output: Location) -> Claim | None:
        return next((c for c in self.claims if c.output == output), None)

    def __enter__(self) -> OutputClaims:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def acquire(self) -> None:
        """Take every claim, or raise :class:`ClaimError` (holding none) when another run
        holds an output and this run does not wait for it (long enough)."""
        self._beat.start()
        try:
            for claim in self.claims:
                self._take(claim)
            # one wait for every takeover's writes in flight, not one per output
            wait = max((c.settled_at for c in self.claims), default=0.0) - time.monotonic()
            if wait > 0:
                logger.info(
                    "waiting %.1f s for writes in flight of the runs taken over to end", wait
                )
                time.sleep(wait)
        except BaseException:
            self.release()
            raise

    def _take(self, claim: Claim) -> None:
        start = time.monotonic()
        report = start + self.REPORT_EVERY
        while True:
            other = claim.try_acquire(settle=False)
            if other is None:
                if self.waited:
                    logger.info("%s is this run's now", claim.output.shown)
                return
            now = time.monotonic()
            if self.wait is False:
                raise ClaimError(
                    f"the output {claim.output.shown} is being written by another run: "
                    f"{other.describe()}; wait for it (ddr run --wait) or stop that run"
                )
            if self.wait is not True and now - start >= float(self.wait):
                raise ClaimError(
                    f"the output {claim.output.shown} is still being written by another run "
                    f"after {float(self.wait):g} s, the time it was given to wait: "
                    f"{other.describe()}"
                )
            if not self.waited:
                logger.info(
                    "waiting for %s to finish %s (its claim is released when it ends, or "
                    "taken over once stale)",
                    other.describe(),
                    claim.output.shown,
                )
            elif now >= report:
                report = now + self.REPORT_EVERY
                logger.info(
                    "still waiting for %s to finish %s (%.0f s so far)",
                    other.describe(),
                    claim.output.shown,
                    now - start,
                )
            self.waited = True
            time.sleep(self.POLL)

    def _beating(self) -> None:
        while not self._stop.wait(self.timeout / 4):
            for claim in self.claims:
                if claim.version is not None:
                    try:
                        claim.heartbeat()
                    except OSError as exc:  # the store did not answer: try again next time
                        logger.warning("heartbeat of %s failed: %s", claim.location.shown, exc)

    def release(self) -> None:
        """Stop the heartbeat and release every claim this run still holds."""
        self._stop.set()
        if self._beat.is_alive() and self._beat is not threading.current_thread():
            self._beat.join()
        for claim in self.claims:
            claim.release()
