"""Runs own their outputs: one claim per output, taken atomically, kept alive by a heartbeat,
checked before every write, released when the run ends.

A claim is a small JSON record beside its output, ``<output>.ddr-claim``: the run's id, the
host and process that hold it, since when, a heartbeat (the holder's clock, renewed every
quarter of the claim's ``timeout``) and a token, unique to the claim. The token is also
written into the output's metadata (``ddr:claim``), so that an output rewritten by another
run is told apart from one's own.

- Taking a claim is an exclusive create: ``O_CREAT | O_EXCL`` on a local file system, a
  conditional PUT (``If-None-Match: *``) on S3. Of two runs, one gets it.
- A claim another run holds is refused, naming that run, or waited for (``wait``).
- A stale claim (its process is gone on this host, or its heartbeat is older than its
  timeout) is taken over by replacing it only if it is still the record judged stale: under
  an exclusive ``flock`` locally, a conditional PUT (``If-Match: <ETag>``) on S3. Of two
  takers, one gets it; the takeover is logged.
- Every write into the output checks that the claim is still the writer's
  (:class:`ClaimRef.fence`): locally under a shared ``flock`` of the claim file held for the
  whole write, so a takeover (which needs the exclusive lock) waits for writes in flight and
  every later write sees the new holder; on object stores by reading the claim at most
  ``ttl`` seconds before the write, and a takeover there waits :attr:`Claim.grace` seconds
  before it writes anything, so writes of the old holder in flight have ended.
- Releasing deletes the record if it is still one's own (under the lock, or a conditional
  DELETE).

Other schemes (``gs://``, ``az://``, ``memory://``) create claims with their filesystem's
exclusive-create mode (``pipe_file(mode="create")``); their takeovers and releases read,
compare and write, which is not atomic.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

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

CLAIM_SUFFIX = ".ddr-claim"
#: the output attribute that holds the token of the claim it was written under
CLAIM_ATTR = "ddr:claim"
_HOST = socket.gethostname()


class ClaimError(RuntimeError):
    """Another run holds the output (this run refused, or waited for it too long)."""


class ClaimLost(RuntimeError):
    """This run's claim on an output was taken over (or is gone): its writes stop."""


def claim_location(output: Location) -> Location:
    """Where the claim of ``output`` is kept: ``<output>.ddr-claim``, beside it."""
    return Location(output.protocol, output.path + CLAIM_SUFFIX, output.storage_options)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _process_started(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


# ------------------------------------------------------------------------ record
@dataclass(frozen=True)
class ClaimRecord:
    """What a claim says: who holds the output, since when, and its last heartbeat."""

    output: str
    run: str
    token: str
    host: str
    pid: int
    pid_started: float
    since: str
    heartbeat: float
    timeout: float
    command: str = ""

    def to_bytes(self) -> bytes:
        return (json.dumps({"ddr-claim": 1, **asdict(self)}, indent=1) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ClaimRecord | None:
        """The record, or None for an empty or unreadable one (a claim being created)."""
        try:
            raw = json.loads(data.decode("utf-8"))
            raw.pop("ddr-claim")
            return cls(**raw)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def describe(self, now: float | None = None) -> str:
        age = (now or time.time()) - self.heartbeat
        return (
            f"run {self.run} (host {self.host}, pid {self.pid}, since {self.since}, last "
            f"heartbeat {age:.0f} s ago)"
        )

    def stale(self, now: float | None = None) -> str | None:
        """Why the claim may be taken over, or None while its run holds it."""
        if self.host == _HOST:
            started = _process_started(self.pid)
            if started is None or abs(started - self.pid_started) > 1.0:
                return f"its process {self.pid} on this host is gone"
        age = (now or time.time()) - self.heartbeat
        if age > self.timeout:
            return (
                f"its last heartbeat is {age:.0f} s old (the claim times out after "
                f"{self.timeout:g} s)"
            )
        return None


# ------------------------------------------------------------------ claim files
class _ClaimFile:
    """The record's storage: exclusive create, read with a version, replace and delete only
    at that version, and a fence that holds while a write checks and makes its change.

    The version is the record's token (local files, compared under the lock) or the
    object's ETag (S3)."""

    #: takeovers must wait before writing (writes of the old holder are not fenced by a lock)
    needs_grace = True

    def __init__(self, loc: Location) -> None:
        self.loc = loc

    def create(self, data: bytes) -> str | None:
        raise NotImplementedError  # pragma: no cover

    def read(self) -> tuple[ClaimRecord | None, str | None]:
        raise NotImplementedError  # pragma: no cover

    def replace(self, data: bytes, version: str) -> str | None:
        raise NotImplementedError  # pragma: no cover

    def delete(self, version: str) -> bool:
        raise NotImplementedError  # pragma: no cover

    @contextlib.contextmanager
    def fence(self, token: str, ttl: float) -> Iterator[None]:
        """Hold while writing: raise :class:`ClaimLost` unless the claim is ``token``'s."""
        key = (self.loc.url, token)
        now = time.monotonic()
        if now - _CHECKED.get(key, -1e9) > ttl:
            record, _ = self.read()
            if record is None or record.token != token:
                raise ClaimLost(_lost_message(self.loc, record))
            _CHECKED[key] = now
        yield


# the last time each (claim, token) was found current in this process (object stores)
_CHECKED: dict[tuple[str, str], float] = {}


def _lost_message(loc: Location, record: ClaimRecord | None) -> str:
    output = loc.shown.removesuffix(CLAIM_SUFFIX)
    if record is None:
        return (
            f"this run's claim on {output} is gone (taken over by another run while this "
            "run's heartbeat had stopped, and released); this run's writes to it stop"
        )
    return (
        f"{output} was taken over by {record.describe()} (this run's claim had gone stale); "
        "this run's writes to it stop"
    )


class _LocalFile(_ClaimFile):
    """A local (or NFS) file: ``O_EXCL`` create; ``flock`` for everything else."""

    needs_grace = False

    def __init__(self, loc: Location) -> None:
        super().__init__(loc)
        self.path = loc.path

    def create(self, data: bytes) -> str | None:
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return _token_of(data)

    @contextlib.contextmanager
    def _locked(self, mode: int) -> Iterator[int | None]:
        """The claim file open and locked (``None`` if there is none): the lock is on the
        file that is at the path now (one deleted meanwhile is opened again)."""
        import fcntl

        while True:
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                yield None
                return
            try:
                fcntl.flock(fd, mode)
                try:
                    current = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    current = False
                if current:
                    yield fd
                    return
            finally:
                os.close(fd)

    @staticmethod
    def _read_fd(fd: int) -> ClaimRecord | None:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return ClaimRecord.from_bytes(b"".join(chunks))

    def read(self) -> tuple[ClaimRecord | None, str | None]:
        import fcntl

        with self._locked(fcntl.LOCK_SH) as fd:
            if fd is None:
                return None, None
            record = self._read_fd(fd)
            return record, (record.token if record else "")

    def replace(self, data: bytes, version: str) -> str | None:
        import fcntl

        with self._locked(fcntl.LOCK_EX) as fd:
            if fd is None:
                return None
            record = self._read_fd(fd)
            if (record.token if record else "") != version:
                return None
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            return _token_of(data)

    def delete(self, version: str) -> bool:
        import fcntl

        with self._locked(fcntl.LOCK_EX) as fd:
            if fd is None:
                return False
            record = self._read_fd(fd)
            if record is None or record.token != version:
                return False
            os.unlink(self.path)
            return True

    @contextlib.contextmanager
    def fence(self, token: str, ttl: float) -> Iterator[None]:
        import fcntl

        with self._locked(fcntl.LOCK_SH) as fd:
            record = self._read_fd(fd) if fd is not None else None
            if record is None or record.token != token:
                raise ClaimLost(_lost_message(self.loc, record))
            yield


def _token_of(data: bytes) -> str:
    record = ClaimRecord.from_bytes(data)
    return record.token if record else ""


def _refused(exc: BaseException) -> bool:
    """Whether an object store refused a conditional request (412, or 409 for a
    concurrent conditional write)."""
    text = str(exc).lower().replace("-", "")
    return "precondition" in text or "conditionalrequestconflict" in text


class _S3File(_ClaimFile):
    """An S3 object: conditional PUT and DELETE (``If-None-Match: *``, ``If-Match``)."""

    def create(self, data: bytes) -> str | None:
        try:
            with self.loc.errors("write"):
                out = self.loc.fs.pipe_file(self.loc.fs_path, data, mode="create")
        except FileExistsError:
            return None
        return str(out["ETag"]) if isinstance(out, dict) and "ETag" in out else self.read()[1]

    def read(self) -> tuple[ClaimRecord | None, str | None]:
        for _ in range(5):  # the object changed between the HEAD and the GET: read again
            try:
                with self.loc.errors("read"), self.loc.fs.open(self.loc.fs_path, "rb") as f:
                    etag = str(f.details.get("ETag", ""))
                    data = f.read()
            except FileNotFoundError:
                return None, None
            except OSError as exc:
                # s3fs reads the object at the ETag its HEAD saw: FileExpired if it changed
                if _refused(exc) or type(exc).__name__ == "FileExpired":
                    continue
                raise
            return ClaimRecord.from_bytes(data), etag
        raise OSError(f"{self.loc.url} keeps changing while it is read")

    def replace(self, data: bytes, version: str) -> str | None:
        try:
            with self.loc.errors("write"):
                out = self.loc.fs.pipe_file(self.loc.fs_path, data, IfMatch=version)
        except (OSError, FileNotFoundError) as exc:
            if _refused(exc) or isinstance(exc, FileNotFoundError):
                return None
            raise
        return str(out["ETag"]) if isinstance(out, dict) and "ETag" in out else self.read()[1]

    def delete(self, version: str) -> bool:
        bucket, _, key = self.loc.path.partition("/")
        try:
            with self.loc.errors("write"):
                self.loc.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
        except (OSError, FileNotFoundError) as exc:
            if _refused(exc) or isinstance(exc, FileNotFoundError):
                return False
            raise
        return True


class _FsspecFile(_ClaimFile):
    """Any other fsspec filesystem: exclusive create where it has one; takeovers and
    releases read, compare and write (not atomic)."""

    def create(self, data: bytes) -> str | None:
        try:
            with self.loc.errors("write"):
                self.loc.fs.pipe_file(self.loc.fs_path, data, mode="create")
        except FileExistsError:
            return None
        return _token_of(data)

    def read(self) -> tuple[ClaimRecord | None, str | None]:
        try:
            data = self.loc.read_bytes()
        except FileNotFoundError:
            return None, None
        record = ClaimRecord.from_bytes(data)
        return record, (record.token if record else "")

    def replace(self, data: bytes, version: str) -> str | None:
        if self.read()[1] != version:
            return None
        self.loc.write_bytes(data)
        return _token_of(data)

    def delete(self, version: str) -> bool:
        if self.read()[1] != version:
            return False
        self.loc.remove()
        return True


def _claim_file(loc: Location) -> _ClaimFile:
    if loc.is_local:
        return _LocalFile(loc)
    if loc.protocol == "s3":
        return _S3File(loc)
    return _FsspecFile(loc)


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
        with _claim_file(self.location).fence(self.token, self.ttl):
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
        self._file = _claim_file(self.location)

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
        since = self.record.since if self.record is not None else _now_iso()
        return ClaimRecord(
            self.output.url,
            self.run,
            self.token,
            _HOST,
            pid,
            _process_started(pid) or 0.0,
            since,
            time.time(),
            self.timeout,
            self.command,
        )

    # ------------------------------------------------------------------ taking
    def try_acquire(self) -> ClaimRecord | None:
        """Take the claim if it is free or stale (a takeover is logged); else return the
        record of the run that holds it."""
        while True:
            mine = self._new_record()
            version = self._file.create(mine.to_bytes())
            if version is not None:
                self.record, self.version = mine, version
                return None
            other, version = self._file.read()
            if version is None:  # released meanwhile
                continue
            if other is None:  # being created by another run
                time.sleep(0.05)
                other, version = self._file.read()
                if other is None:
                    continue
            why = other.stale()
            if why is None:
                return other
            version = self._file.replace(mine.to_bytes(), version)
            if version is None:  # another run took it over first: look again
                continue
            self.record, self.version = mine, version
            self.took_over = other.run
            logger.warning("taking over %s from %s: %s", self.output.shown, other.describe(), why)
            if self.grace:
                # writes of the other run that checked its claim just before are done by then
                time.sleep(self.grace)
            return None

    # -------------------------------------------------------------- keeping
    def heartbeat(self) -> bool:
        """Renew the heartbeat; False (and an error logged) if the claim was lost."""
        if self.version is None:
            return False
        mine = self._new_record()
        version = self._file.replace(mine.to_bytes(), self.version)
        if version is None:
            other, _ = self._file.read()
            logger.warning("%s", _lost_message(self.location, other))
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
        except BaseException:
            self.release()
            raise

    def _take(self, claim: Claim) -> None:
        start = time.monotonic()
        report = start + self.REPORT_EVERY
        while True:
            other = claim.try_acquire()
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
                    f"after {now - start:.0f} s of waiting: {other.describe()}"
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
