"""Where a claim lives and how it is changed atomically: the claim record and its storage.

A claim (:mod:`ddr.io.claims`) is a JSON record beside its output, ``<output>.ddr-claim``
(:class:`ClaimRecord`). Its storage (:func:`claim_file`) offers an exclusive create, a read
that returns the record with a version, a replace and a delete that happen only at that
version, and a fence that holds while a write checks the claim and makes its change:

- local (and NFS) files: ``O_CREAT | O_EXCL`` to create; every other change under an
  exclusive ``flock`` of the file (the version is the record's token, compared under the
  lock); the fence is a shared ``flock`` held for the whole write, so a takeover waits for
  the writes in flight and every later write sees the new holder;
- S3: conditional requests, ``If-None-Match: *`` to create, ``If-Match: <ETag>`` to replace
  and to delete (the version is the object's ETag); the fence reads the record at most
  ``ttl`` seconds before a write;
- any other fsspec filesystem (``gs://``, ``az://``, ``memory://``): its own exclusive-create
  mode (``pipe_file(mode="create")``); replace and delete read, compare and write, which is
  not atomic.
"""

from __future__ import annotations

import abc
import contextlib
import datetime as _dt
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

from ddr.io.locations import Location

__all__ = [
    "CLAIM_SUFFIX",
    "HOST",
    "ClaimLost",
    "ClaimRecord",
    "LockHeld",
    "claim_file",
    "claim_location",
    "lock_holders",
    "lost_message",
    "now_iso",
    "process_started",
    "refused",
]

CLAIM_SUFFIX = ".ddr-claim"
HOST = socket.gethostname()

logger = logging.getLogger("ddr.io.claims")


class ClaimLost(RuntimeError):
    """This run's claim on an output was taken over (or is gone): its writes stop."""


def claim_location(output: Location) -> Location:
    """Where the claim of ``output`` is kept: ``<output>.ddr-claim``, beside it."""
    return Location(output.protocol, output.path + CLAIM_SUFFIX, output.storage_options)


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def process_started(pid: int) -> float | None:
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
        if self.host == HOST:
            started = process_started(self.pid)
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
class _ClaimFile(abc.ABC):
    """The record's storage: exclusive create, read with a version, replace and delete only
    at that version, and a fence that holds while a write checks and makes its change.

    The version is the record's token (local files, compared under the lock) or the
    object's ETag (S3)."""

    #: takeovers must wait before writing (writes of the old holder are not fenced by a lock)
    needs_grace = True

    def __init__(self, loc: Location) -> None:
        self.loc = loc

    @abc.abstractmethod
    def create(self, data: bytes) -> str | None:
        """See the class docstring."""

    @abc.abstractmethod
    def read(self) -> tuple[ClaimRecord | None, str | None]:
        """See the class docstring."""

    @abc.abstractmethod
    def replace(self, data: bytes, version: str) -> str | None:
        """See the class docstring."""

    @abc.abstractmethod
    def delete(self, version: str) -> bool:
        """See the class docstring."""

    def touch(self, data: bytes, version: str) -> str | None:
        """Renew the heartbeat (``data``: the record with the new one) at ``version``."""
        return self.replace(data, version)

    @contextlib.contextmanager
    def fence(self, token: str, ttl: float) -> Iterator[None]:
        """Hold while writing: raise :class:`ClaimLost` unless the claim is ``token``'s."""
        key = (self.loc.url, token)
        now = time.monotonic()
        if now - _CHECKED.get(key, -1e9) > ttl:
            record, _ = self.read()
            if record is None or record.token != token:
                raise ClaimLost(lost_message(self.loc, record))
            _CHECKED[key] = now
        yield


# the last time each (claim, token) was found current in this process (object stores)
_CHECKED: dict[tuple[str, str], float] = {}


def lost_message(loc: Location, record: ClaimRecord | None) -> str:
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

    def __init__(self, loc: Location, lock_limit: float | None = None) -> None:
        super().__init__(loc)
        self.path = loc.path
        #: seconds an exclusive lock (a takeover, a release) waits for writes in flight
        self.lock_limit = lock_limit

    def create(self, data: bytes) -> str | None:
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            # a claim that could not be written (a full disk) is nobody's: leaving it empty
            # would make every later run wait for it
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        finally:
            os.close(fd)
        return _token_of(data)

    @contextlib.contextmanager
    def _locked(self, mode: int) -> Iterator[int | None]:
        """The claim file open and locked (``None`` if there is none): the lock is on the
        file that is at the path now (one deleted meanwhile is opened again)."""

        while True:
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                yield None
                return
            try:
                _flock(fd, mode, self.loc, self.lock_limit)
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
        """The record, its heartbeat the later of the one written and the file's
        modification time (what :meth:`touch` renews)."""
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        record = ClaimRecord.from_bytes(b"".join(chunks))
        if record is None:
            return None
        touched = os.fstat(fd).st_mtime
        return replace(record, heartbeat=max(record.heartbeat, touched))

    def touch(self, data: bytes, version: str) -> str | None:
        # the modification time is the heartbeat: renewed under the shared lock, so that a
        # heartbeat never waits for this run's own writes in flight (which hold it too)
        import fcntl

        with self._locked(fcntl.LOCK_SH) as fd:
            record = self._read_fd(fd) if fd is not None else None
            if record is None or record.token != version:
                return None
            os.utime(fd)
            return version

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
                raise ClaimLost(lost_message(self.loc, record))
            yield


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class LockHeld(TimeoutError):
    """The exclusive lock of a claim file was not granted in time: a process holds the
    shared lock of a write into the output and does not end it (paused, or hung)."""

    def __init__(self, loc: Location, waited: float, holders: list[int]) -> None:
        self.loc = loc
        self.waited = waited
        self.holders = holders
        super().__init__(
            f"a write into {loc.shown.removesuffix(CLAIM_SUFFIX)} has been in flight for "
            f"{waited:.0f} s and has not ended: {_describe_holders(holders)}"
        )


def _describe_holders(pids: list[int]) -> str:
    """The processes that hold a claim file's lock, with their state (a paused one says
    how to go on)."""
    import psutil

    if not pids:
        return "the process that holds its lock is not on this host"
    said = []
    for pid in pids:
        try:
            status = psutil.Process(pid).status()
        except psutil.Error:
            status = "gone"
        if status == psutil.STATUS_STOPPED:
            said.append(
                f"process {pid} on this host holds its lock and is stopped (SIGSTOP or "
                f"Ctrl-Z): continue it (kill -CONT {pid}) or end it"
            )
        else:
            said.append(f"process {pid} on this host holds its lock ({status})")
    return "; ".join(said)


def lock_holders(path: str) -> list[int]:
    """The pids that hold an ``flock`` on the file at ``path``, from Linux's
    ``/proc/locks`` (empty elsewhere, or for a lock held on another NFS client)."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        # "1: FLOCK  ADVISORY  READ  4321 fd:01:1234567 0 EOF" (a blocked waiter: "1: -> ...")
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            pid, ino = int(parts[4]), int(parts[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if ino == inode and pid != os.getpid() and pid not in pids:
            pids.append(pid)
    return pids


def _flock(fd: int, mode: int, loc: Location, limit: float | None = None) -> None:
    """``flock(fd, mode)``; an exclusive lock that keeps waiting (for a write of a paused
    or slow process, which holds the shared lock) is said every 10 s, and given up after
    ``limit`` seconds (:class:`LockHeld`, naming the processes that hold it)."""
    import fcntl

    if mode != fcntl.LOCK_EX:
        fcntl.flock(fd, mode)
        return
    start = report = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            now = time.monotonic()
            if limit is not None and now - start >= limit:
                raise LockHeld(loc, now - start, lock_holders(loc.path)) from None
            if now - report >= 10.0:
                report = now
                logger.info(
                    "waiting %.0f s for the writes in flight under %s to end (a process "
                    "writing the output holds its lock)",
                    now - start,
                    loc.shown,
                )
            time.sleep(0.02)


def _token_of(data: bytes) -> str:
    record = ClaimRecord.from_bytes(data)
    return record.token if record else ""


def refused(exc: BaseException) -> bool:
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
                if refused(exc) or type(exc).__name__ == "FileExpired":
                    continue
                raise
            return ClaimRecord.from_bytes(data), etag
        raise OSError(f"{self.loc.url} keeps changing while it is read")

    def replace(self, data: bytes, version: str) -> str | None:
        try:
            with self.loc.errors("write"):
                out = self.loc.fs.pipe_file(self.loc.fs_path, data, IfMatch=version)
        except (OSError, FileNotFoundError) as exc:
            if refused(exc) or isinstance(exc, FileNotFoundError):
                return None
            raise
        return str(out["ETag"]) if isinstance(out, dict) and "ETag" in out else self.read()[1]

    def delete(self, version: str) -> bool:
        bucket, _, key = self.loc.path.partition("/")
        try:
            with self.loc.errors("write"):
                self.loc.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
        except (OSError, FileNotFoundError) as exc:
            if refused(exc) or isinstance(exc, FileNotFoundError):
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


def claim_file(loc: Location, lock_limit: float | None = None) -> _ClaimFile:
    """The storage of the claim record at ``loc``; locally, a takeover or a release waits
    at most ``lock_limit`` seconds for the writes in flight (:class:`LockHeld`)."""
    if loc.is_local:
        return _LocalFile(loc, lock_limit)
    if loc.protocol == "s3":
        return _S3File(loc)
    return _FsspecFile(loc)
