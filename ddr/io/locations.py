"""Where data lives: a local path or a URL, as one comparable, redacted :class:`Location`.

Every place ddr takes a path (inputs, outputs, saved models, demo data, reports, summaries)
turns it into a :class:`Location` with :func:`resolve`, and asks the location for what it
needs: a zarr store (:meth:`Location.store`: zarr's ``LocalStore`` for local paths, zarr's
``FsspecStore`` for URLs), a filesystem handle for small files, and a normalised form to
compare (``s3://b/x``, ``s3://b/x/`` and ``s3://b/./x`` are one location; an output inside
an input is found by prefix, not by string).

Schemes: ``s3://``, ``gs://`` (``gcs://``), ``az://`` (``abfs://``, ``abfss://``),
``http(s)://`` (read-only), ``file://`` and ``memory://`` (one process; for tests). Object
stores need their fsspec filesystem (``pip install 'ddr-stats[cloud]'``). Credentials and endpoints
come from where each library looks (AWS/GCS/Azure environment variables and config files,
``AWS_ENDPOINT_URL``) or from ``storage_options``; values of secret-looking keys are remembered
so that :func:`redact` can remove them from anything ddr writes or says (provenance, summaries,
logs, error messages), and they never enter the location's text or its comparison.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import posixpath
import re
import shutil
import threading
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from ddr.io.redaction import redact, redact_options, remember_secret
from ddr.io.request_bounds import DEFAULTS, environment_bounds
from ddr.io.storage_errors import endpoint_note, translate

__all__ = [
    "Location",
    "LocationError",
    "filesystem_package",
    "redact",
    "redact_options",
    "resolve",
]

logger = logging.getLogger("ddr.io.locations")

# scheme -> (canonical scheme, the package that provides its filesystem)
_SCHEMES: dict[str, tuple[str, str | None]] = {
    "file": ("file", None),
    "memory": ("memory", None),
    "s3": ("s3", "s3fs"),
    "s3a": ("s3", "s3fs"),
    "gs": ("gs", "gcsfs"),
    "gcs": ("gs", "gcsfs"),
    "az": ("az", "adlfs"),
    "abfs": ("az", "adlfs"),
    "abfss": ("az", "adlfs"),
    "http": ("http", "aiohttp"),
    "https": ("https", "aiohttp"),
}
_READ_ONLY = frozenset({"http", "https"})
_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
# S3, one GET per object: with its default max_concurrency s3fs asks for an object's size
# (a HEAD) before every read, to split objects above 50 MiB into concurrent parts; Zarr chunks
# are smaller, and the HEAD doubles the requests (measured on moto's server: a pass over M
# 14.3 s with it, 6.3 s without; benchmarks/results/object_store.md). Give
# storage_options={"max_concurrency": 10} for chunks or files above 50 MiB.
S3_OPTIONS: dict[str, Any] = {"max_concurrency": 1}
# S3: finite waits, so an endpoint that does not answer is an error, not a hang
# (ddr.io.request_bounds says which; ddr.io.bounded_s3 enforces them). ddr tries a request
# (``tries``, 5) and botocore makes one attempt per try: its ``max_attempts: 1`` would be one
# *retry*, and doubled every wait (measured: 10 attempts for one exists()).
# ``config_kwargs`` and ``tries`` in storage_options, then DDR_S3_* variables, override them.
S3_TIMEOUTS: dict[str, Any] = {
    "connect_timeout": DEFAULTS["connect_timeout"],
    "read_timeout": DEFAULTS["read_timeout"],
    "retries": {"total_max_attempts": 1},
}


class LocationError(ValueError):
    """A path or URL ddr cannot use (bad syntax, unknown scheme, a read-only scheme written)."""


# ------------------------------------------------------------------------- resolving
def _scheme_of(text: str) -> tuple[str, str] | None:
    """``(scheme as written, rest)`` when ``text`` starts like a URL, else None."""
    m = _SCHEME_RE.match(text)
    if m is None or len(m.group(1)) == 1:  # "C:\\..." is a drive, not a scheme
        return None
    return m.group(1), m.group(2)


def filesystem_package(protocol: str) -> str | None:
    """The package that provides the filesystem of a (canonical) scheme."""
    return next((pkg for canon, pkg in _SCHEMES.values() if canon == protocol), None)


def require_filesystem(loc: Location) -> None:
    """Raise ImportError naming ``ddr-stats[cloud]`` when the scheme's filesystem is missing."""
    package = filesystem_package(loc.protocol)
    if package is None:
        return
    import importlib.util

    try:
        missing = importlib.util.find_spec(package) is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        raise ImportError(
            f"{loc.url}: {loc.protocol}:// URLs need the package {package}, which is not "
            "installed; install it with pip install 'ddr-stats[cloud]'"
        )


def _known() -> str:
    return "s3://, gs://, az:// (abfs://), http(s):// (read-only), file://, memory://"


def resolve(
    path: str | os.PathLike[str] | Location, storage_options: Mapping[str, Any] | None = None
) -> Location:
    """The :class:`Location` of a local path or URL.

    Parameters
    ----------
    path : str, path-like or Location
        A local path (relative to the working directory; ``~`` expanded) or a URL.
    storage_options : mapping, optional
        Options for the URL's fsspec filesystem (``key``/``secret``, ``endpoint_url``,
        ``anon``, ``token``, ``account_name``, ...). Not allowed for local paths.

    Raises
    ------
    LocationError
        A malformed URL (``s3:/x``, ``S3://x``), an unknown scheme, credentials inside the
        URL, a URL without a bucket, storage_options given for a local path, a NUL byte.
    """
    if isinstance(path, Location):
        if storage_options is None:
            return path
        return Location(path.protocol, path.path, dict(storage_options))
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"a path must be a str or path-like; got {type(path).__name__}")
    if not text.strip():
        raise LocationError("the path is empty")
    if "\x00" in text:  # no filesystem or URL holds one; os would refuse it mid-run
        raise LocationError(f"a path cannot hold a NUL byte (\\x00); got {redact(text)!r}")
    opts = dict(storage_options or {})
    redact_options(opts)  # remember the secrets before anything can fail
    parsed = _scheme_of(text) if not isinstance(path, Path) else None
    if parsed is None:
        if opts:
            raise LocationError(
                f"storage_options were given for the local path {text!r}; they are for URLs"
            )
        return Location("file", os.path.abspath(os.path.expanduser(text)), {})
    scheme, rest = parsed
    low = scheme.lower()
    if low in _SCHEMES and scheme != low:
        raise LocationError(
            f"{redact(text)!r}: URL schemes are lower case; did you mean {low}:{redact(rest)!r}?"
        )
    if low not in _SCHEMES:
        if rest.startswith("//"):
            raise LocationError(
                f"{redact(text)!r}: unknown URL scheme {scheme!r}; ddr reads and writes {_known()}"
            )
        # a colon in a plain file name ("run:1/x.zarr"), not a URL
        if opts:
            raise LocationError(
                f"storage_options were given for the local path {text!r}; they are for URLs"
            )
        return Location("file", os.path.abspath(os.path.expanduser(text)), {})
    if not rest.startswith("//"):
        fixed = f"{low}://{rest.lstrip('/')}"
        raise LocationError(f"{redact(text)!r} is not a URL: did you mean {redact(fixed)!r}?")
    protocol, _ = _SCHEMES[low]
    body = rest[2:]
    if protocol == "file":
        if opts:
            raise LocationError(
                f"storage_options were given for the local path {text!r}; they are for URLs"
            )
        host, slash, local = body.partition("/")
        if host not in ("", "localhost"):
            raise LocationError(
                f"{text!r}: file:// URLs name a local path (file:///abs/path); got host {host!r}"
            )
        return Location("file", os.path.abspath("/" + local if slash else "/"), {})
    if protocol in ("http", "https"):
        host, _, tail = body.partition("/")
        if "@" in host:
            raise _userinfo_error(text, host)
        if not host:
            raise LocationError(f"{text!r}: no host in the URL")
        return Location(protocol, f"{host}/{_clean(tail, text, keep_root=True)}".rstrip("/"), opts)
    head = body.split("/", 1)[0]
    if "@" in head and protocol != "az":
        raise _userinfo_error(text, head)
    clean = _clean(body, text, keep_root=protocol == "memory")
    if protocol == "memory":
        return Location("memory", "/" + clean if clean else "/", opts)
    if not clean:
        raise LocationError(f"{text!r}: the URL names no bucket or container")
    return Location(protocol, clean, opts)


def _userinfo_error(text: str, host: str) -> LocationError:
    userinfo = host.rsplit("@", 1)[0]
    remember_secret(userinfo)
    remember_secret(userinfo.partition(":")[2])
    return LocationError(
        f"{redact(text)!r}: credentials inside a URL are not accepted (they would be "
        "recorded wherever the URL is); give them in storage_options or the environment"
    )


def _clean(body: str, text: str, *, keep_root: bool) -> str:
    """``a//b/./c/`` -> ``a/b/c``; ``..`` resolved, never above the bucket."""
    parts: list[str] = []
    for part in body.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts or (len(parts) == 1 and not keep_root):
                raise LocationError(f"{text!r}: '..' leads outside the bucket")
            parts.pop()
            continue
        parts.append(part)
    return posixpath.join(*parts) if parts else ""


def _prefix_contains(base: str, path: str) -> bool:
    """Whether ``path`` is ``base`` or below it, as normalised strings."""
    return path == base or path.startswith(base.rstrip("/") + "/")


def _same_file_above(base: str, path: str) -> bool:
    """Whether ``base`` (an existing local folder) is ``path`` or one of its existing
    ancestors, compared by device and inode (bind mounts, hard-linked files)."""
    try:
        target = os.stat(base)
    except OSError:
        return False
    probe = path
    while True:
        try:
            st = os.stat(probe)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            return True
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent


# -------------------------------------------------------------------------- location
class Location:
    """A normalised local path or URL, with the options to reach it.

    Two locations are equal when they name the same place (``protocol`` and normalised
    ``path``); ``storage_options`` are not part of it and never part of its text.

    Attributes
    ----------
    protocol : str
        ``"file"``, ``"memory"``, ``"s3"``, ``"gs"``, ``"az"``, ``"http"`` or ``"https"``.
    path : str
        Local: the absolute path. Object stores: ``bucket/key/...`` without a trailing
        slash. http(s): ``host/path``. memory: ``/path``.
    storage_options : dict
        Options for the fsspec filesystem (URLs only).
    """

    def __init__(self, protocol: str, path: str, storage_options: Mapping[str, Any]) -> None:
        self.protocol = protocol
        self.path = path
        self.storage_options = dict(storage_options)

    # identity ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The normalised URL (local: the absolute path), without any credential."""
        if self.protocol == "file":
            return self.path
        if self.protocol == "memory":
            return f"memory://{self.path}"
        return f"{self.protocol}://{self.path}"

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Location):
            return NotImplemented
        return (self.protocol, self.path) == (other.protocol, other.path)

    def __hash__(self) -> int:
        return hash((self.protocol, self.path))

    def __reduce__(self) -> Any:
        # the S3 bounds resolved here (from this process's environment) travel with it: a
        # worker waits as long as the client would
        options = dict(self.storage_options)
        if self.protocol == "s3":
            options.update(self._s3_bounds())
        return (Location, (self.protocol, self.path, options))

    @property
    def shown(self) -> str:
        """For messages: a local path relative to the working directory when below it."""
        if self.protocol == "file":
            rel = os.path.relpath(self.path)
            return self.path if rel.startswith("..") else rel
        return self.url

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    @property
    def read_only(self) -> bool:
        return self.protocol in _READ_ONLY

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def _root_depth(self) -> int:
        """Path segments that are not a folder one may write into (the bucket, the host)."""
        return 0 if self.protocol in ("file", "memory") else 1

    @property
    def bucket(self) -> str | None:
        """The bucket or container of an object store URL."""
        if self.protocol in ("s3", "gs", "az"):
            return self.path.split("/", 1)[0]
        return None

    def joinpath(self, *parts: str) -> Location:
        """The location of ``parts`` inside this one."""
        path = posixpath.join(self.path, *parts)
        if self.protocol == "file":
            path = os.path.normpath(path)
        else:
            path = posixpath.normpath(path)
        return Location(self.protocol, path, self.storage_options)

    def contains(self, other: Location) -> bool:
        """Whether ``other`` is this location or lies inside it.

        Local paths are compared as the filesystem sees them, not as written: after
        resolving symbolic links (``alias.zarr/X`` where ``alias.zarr`` links to ``in.zarr``
        lies inside ``in.zarr``), and by device and inode, so that a folder reached through
        a bind mount or a second mount of the same filesystem is the same folder.
        """
        if not isinstance(other, Location) or self.protocol != other.protocol:
            return False
        if _prefix_contains(self.path, other.path):
            return True
        if self.protocol != "file":
            return False
        mine = os.path.realpath(self.path)
        theirs = os.path.realpath(other.path)
        if _prefix_contains(mine, theirs):
            return True
        return _same_file_above(mine, theirs)

    def overlaps(self, other: Location) -> bool:
        """Whether one of the two is, or lies inside, the other."""
        return self.contains(other) or other.contains(self)

    @property
    def link_note(self) -> str:
        """For messages about a local path reached through a symbolic link: where it really
        is, in parentheses (empty otherwise)."""
        if self.protocol != "file":
            return ""
        real = os.path.realpath(self.path)
        if real == self.path:
            return ""
        return f" (through a symbolic link: {Location('file', real, {}).shown})"

    def relative_to(self, other: Location) -> str:
        """This location's path below ``other`` (which must contain it)."""
        if self.path == other.path:
            return ""
        return self.path[len(other.path.rstrip("/")) + 1 :]

    # handles -------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        opts = dict(self.storage_options)
        if self.protocol in ("s3", "gs", "az"):
            # ddr writes and replaces outputs, and asks again whether they exist: a cached
            # listing would answer from before (an output removed for rewriting "exists")
            opts.setdefault("use_listings_cache", False)
        if self.protocol == "s3":
            for k, v in S3_OPTIONS.items():
                opts.setdefault(k, v)
            opts.update(self._s3_bounds())
        return opts

    def _s3_bounds(self) -> dict[str, Any]:
        """``config_kwargs`` (botocore's timeouts, one attempt per try) and ``tries``: the
        storage_options' own, else the environment's (DDR_S3_*), else ddr's defaults."""
        try:
            env = environment_bounds()
        except ValueError as exc:
            raise LocationError(f"{self.url}: {exc}") from None
        # a copy: botocore changes the ``retries`` it is given (it adds the retry mode)
        config = copy.deepcopy(dict(self.storage_options.get("config_kwargs") or {}))
        for k, v in S3_TIMEOUTS.items():
            config.setdefault(k, env.get(k, copy.deepcopy(v)))
        tries = self.storage_options.get("tries", env.get("tries", DEFAULTS["tries"]))
        return {"config_kwargs": config, "tries": int(tries)}

    @property
    def fsspec_url(self) -> str:
        if self.protocol == "file":
            return self.path
        path = self.path.lstrip("/") if self.protocol == "memory" else self.path
        return f"{self.protocol}://{path}"

    @cached_property
    def fs(self) -> Any:
        """The fsspec filesystem (synchronous interface) of this location."""
        import fsspec

        if self.protocol == "file":
            return fsspec.filesystem("file")
        require_filesystem(self)
        with self.errors("connect"):
            if self.protocol == "s3":
                from ddr.io.bounded_s3 import BoundedS3FileSystem

                return BoundedS3FileSystem(**self._options())
            return fsspec.filesystem(self.protocol, **self._options())

    @property
    def fs_path(self) -> str:
        """The path to give :attr:`fs`."""
        if self.protocol in ("http", "https"):
            return self.url
        return self.path

    def store(self, *, read_only: bool = True) -> Any:
        """A zarr store rooted here: ``LocalStore`` for local paths (ddr reads their chunk
        files itself), ``FsspecStore`` for URLs."""
        if self.protocol == "file":
            from zarr.storage import LocalStore

            return LocalStore(self.path, read_only=read_only)
        if not read_only:
            self.check_writable()
        require_filesystem(self)
        from zarr.storage import FsspecStore

        logger.debug(
            "zarr FsspecStore for %s (read_only=%s, storage_options=%s)",
            self.url,
            read_only,
            redact_options(self._options()),
        )
        with self.errors("connect"):
            if self.protocol == "s3":  # zarr's store on ddr's bounded filesystem
                from ddr.io.bounded_s3 import BoundedS3FileSystem

                fs = BoundedS3FileSystem(asynchronous=True, **self._options())
                return FsspecStore(fs=fs, path=self.path, read_only=read_only)
            return FsspecStore.from_url(
                self.fsspec_url, storage_options=self._options(), read_only=read_only
            )

    # small-file operations -----------------------------------------------------------
    def exists(self) -> bool:
        if self.protocol == "file":
            return os.path.exists(self.path)
        with self.errors("read"):
            if self.fs.exists(self.fs_path):
                return True
        # an HTTP server need not answer for a folder: a Zarr store is there if its
        # metadata is
        return self.protocol in _READ_ONLY and self.is_zarr()

    def is_empty_folder(self) -> bool:
        """Whether this is a local folder with nothing in it (what a write that failed at
        once, on a full disk, leaves behind; object stores have no empty folders)."""
        if self.protocol != "file" or not os.path.isdir(self.path):
            return False
        with os.scandir(self.path) as entries:
            return next(entries, None) is None

    def is_file(self) -> bool:
        if self.protocol == "file":
            return os.path.isfile(self.path)
        with self.errors("read"):
            return bool(self.fs.isfile(self.fs_path))

    def is_zarr(self) -> bool:
        """Whether Zarr v2 or v3 metadata sits here (a group or an array)."""
        if self.protocol == "file" and not os.path.isdir(self.path):
            return False
        return any(self.joinpath(f).is_file() for f in ("zarr.json", ".zgroup", ".zarray"))

    def read_bytes(self) -> bytes:
        if self.protocol == "file":
            return Path(self.path).read_bytes()
        with self.errors("read"):
            return bytes(self.fs.cat_file(self.fs_path))

    def write_bytes(self, data: bytes) -> None:
        """Write a whole file so that it never exists half-written: locally to a temporary
        name renamed into place, on an object store in one object write (a PUT is atomic)."""
        if self.protocol == "file":
            p = Path(self.path)
            p.parent.mkdir(parents=True, exist_ok=True)
            if self.is_empty_folder():  # what a full disk leaves: nobody's, and in the way
                p.rmdir()
            tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{threading.get_ident()}")
            try:
                tmp.write_bytes(data)
                os.replace(tmp, p)
            except BaseException:
                tmp.unlink(missing_ok=True)  # never leave a half-written temporary behind
                raise
            return
        self.check_writable()
        with self.errors("write"):
            self.fs.pipe_file(self.fs_path, data)

    def remove(self) -> None:
        """Delete everything at this location (a file, a folder or a prefix)."""
        if self.protocol == "file":
            if os.path.isdir(self.path) and not os.path.islink(self.path):
                shutil.rmtree(self.path)
            elif os.path.lexists(self.path):
                os.remove(self.path)
            return
        self.check_writable()
        with self.errors("write"):
            if self.fs.exists(self.fs_path):
                self.fs.rm(self.fs_path, recursive=True)

    def size(self) -> int:
        if self.protocol == "file":
            return os.path.getsize(self.path)
        with self.errors("read"):
            return int(self.fs.size(self.fs_path))

    def du(self, exclude: tuple[str, ...] = ()) -> int:
        """Bytes of every file under this location whose name is not in ``exclude``."""
        if self.protocol == "file":
            base = Path(self.path)
            return sum(
                f.stat().st_size for f in base.rglob("*") if f.is_file() and f.name not in exclude
            )
        with self.errors("read"):
            found = self.fs.find(self.fs_path, detail=True)
        return sum(
            int(info.get("size") or 0)
            for key, info in found.items()
            if posixpath.basename(key) not in exclude
        )

    def stat_token(self) -> dict[str, Any]:
        """What identifies a single file without reading it: size and modification time
        (or the object's ETag)."""
        if self.protocol == "file":
            st = os.stat(self.path)
            return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
        with self.errors("read"):
            info = self.fs.info(self.fs_path)
        keep = ("size", "ETag", "etag", "LastModified", "mtime", "last_modified", "md5Hash")
        return {k: str(info[k]) for k in keep if k in info}

    def check_writable(self) -> None:
        """Raise before anything is written where ddr cannot write: a read-only scheme, or
        (object stores) a bucket that does not exist or credentials that are refused."""
        if self.read_only:
            raise LocationError(f"{self.url}: {self.protocol}:// URLs are read-only")
        bucket = self.bucket
        if bucket is None or getattr(self, "_writable", False):
            return
        with self.errors("write"):
            found = self.fs.exists(bucket)
            if not found:
                # exists() answers False for any failure; listing says which it was
                self.fs.ls(bucket, refresh=True)
        if not found:
            raise FileNotFoundError(self.missing_bucket())
        self._writable = True

    def missing_bucket(self) -> str:
        """The message for a bucket (container) that does not exist."""
        return f"{self.url}: the bucket {self.bucket!r} does not exist{endpoint_note(self)}"

    # errors --------------------------------------------------------------------------
    @contextlib.contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Turn what the storage libraries raise into errors that name this location and
        say what to do, with every secret removed."""
        try:
            yield
        except (LocationError, KeyError):
            raise
        except Exception as exc:
            translated = translate(self, action, exc)
            if translated is None:
                raise
            raise translated from None
