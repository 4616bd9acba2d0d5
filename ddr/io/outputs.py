"""Write Zarr outputs that never look complete when they are not.

The protocol, in order:

1. refuse a path that is, contains or lies inside an input (given, or opened in this process);
2. decide what to do with an existing path (``if_exists``): an output is *complete* only if
   its group says ``ddr:status = "complete"``; anything else found there is *incomplete*;
3. the driver writes all metadata with ``ddr:status = "incomplete"``;
4. the workers write chunk-aligned data (every chunk written, empty or not);
5. the driver checks every chunk exists, then writes provenance, the fingerprint and
   ``ddr:status = "complete"`` last, in one metadata write;
6. then, and only then, it consolidates the metadata (every array's metadata copied into the
   group's ``zarr.json``), so ``xr.open_zarr`` opens the output with one read and without
   a warning.

Consolidated metadata never makes an incomplete output look complete: it is written only
after the completion marker (and holds the same ``ddr:status``), an output being written
has none, and replacing an output removes the old one, consolidated metadata included,
before anything is written.

With a claim (:mod:`ddr.io.claims`), every write of steps 2 to 6 is made only while the run
still owns the output, the metadata carries the claim's token, and step 5 happens only if the
output still carries it (on object stores, as a write conditional on the version checked).

A crash anywhere before step 5 leaves a store that says it is incomplete; ``ddr inspect``
and :func:`output_status` report it, and it is replaced only when asked
(``if_exists="overwrite"``, or ``"skip-if-complete"``, which rewrites incomplete outputs).

The same holds on object stores, where nothing can be renamed: the group's ``zarr.json`` is
one object, and the write that makes it say ``complete`` is one PUT (the consolidation that
follows rewrites it, still complete). Whether an output is
complete, and with which fingerprint, is read from that metadata document alone (no listing
of chunks).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr

from ddr.io.checksums import checksummed_encoding
from ddr.io.claims import CLAIM_ATTR, Claim, ClaimLost
from ddr.io.inputs import opened_inputs
from ddr.io.locations import Location, redact, resolve

__all__ = [
    "STATUS_ATTR",
    "IfExists",
    "PendingOutput",
    "check_not_input",
    "claimed_store",
    "mark_complete",
    "output_status",
    "read_attrs",
    "write_zarr",
]

#: The group attribute that says whether an output is ``"complete"`` (written last).
STATUS_ATTR = "ddr:status"
FINGERPRINT_ATTR = "ddr:fingerprint"
PROVENANCE_ATTR = "ddr:provenance"
IfExists = Literal["error", "overwrite", "skip-if-complete"]
_IF_EXISTS = ("error", "overwrite", "skip-if-complete")
Status = Literal["missing", "complete", "incomplete", "not-ddr"]


PathLike = str | os.PathLike | Location


def output_status(path: PathLike, storage_options: Mapping[str, Any] | None = None) -> Status:
    """``"missing"``, ``"complete"``, ``"incomplete"``, or ``"not-ddr"`` (something else).

    Read from the group's metadata document (a few small requests on an object store, never
    a listing of chunks).

    Parameters
    ----------
    path : str, path-like or Location
        A local path or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``).
    storage_options : mapping, optional
        Options of the URL's filesystem, as for :func:`ddr.io.open_input`.

    Returns
    -------
    str
        One of the four states; an empty local folder (what a full disk can leave) is
        ``"missing"``.
    """
    loc = resolve(path, storage_options)
    if not loc.exists() or loc.is_empty_folder():  # an empty folder is nobody's output
        return "missing"
    if not loc.is_zarr():
        return "not-ddr"
    try:
        with loc.errors("read"):
            attrs = zarr.open_group(loc.store(), mode="r").attrs.asdict()
    except (PermissionError, TimeoutError, ConnectionError):
        raise
    except Exception:  # unreadable metadata is what a crash mid-write can leave
        return "incomplete"
    if STATUS_ATTR not in attrs:
        return "not-ddr"
    return "complete" if attrs[STATUS_ATTR] == "complete" else "incomplete"


def read_attrs(path: PathLike, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The group attributes of an output (provenance, fingerprint, status).

    Parameters
    ----------
    path : str, path-like or Location
        A local path or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``).
    storage_options : mapping, optional
        Options of the URL's filesystem, as for :func:`ddr.io.open_input`.

    Returns
    -------
    dict
        The attributes.
    """
    loc = resolve(path, storage_options)
    with loc.errors("read"):
        return zarr.open_group(loc.store(), mode="r").attrs.asdict()


def check_not_input(
    path: PathLike,
    inputs: Iterable[PathLike] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Raise if ``path`` is, contains or lies inside any input.

    Compared as normalised locations: ``s3://b/x``, ``s3://b/x/`` and ``s3://b/./x`` are the
    same place.

    Parameters
    ----------
    path : str, path-like or Location
        The output about to be written.
    inputs : iterable of str, path-like or Location
        Inputs besides those opened in this process (:func:`opened_inputs`), which are always
        checked.
    storage_options : mapping, optional
        Options of the output URL's filesystem.
    """
    out = resolve(path, storage_options)
    for inp in {resolve(i) for i in inputs} | opened_inputs():
        if out.overlaps(inp):
            raise ValueError(
                f"refusing to write the output {out.url!r}: it would overwrite the input "
                f"{inp.url!r}; choose another output path"
            )


def _prepare(loc: Location, if_exists: str, fingerprint: str | None) -> Literal["write", "skip"]:
    if if_exists not in _IF_EXISTS:
        raise ValueError(f"if_exists must be one of {_IF_EXISTS}; got {if_exists!r}")
    loc.check_writable()
    status = output_status(loc)
    if status == "missing":
        return "write"
    if status == "not-ddr":
        if not loc.is_zarr() or if_exists != "overwrite":
            raise FileExistsError(
                f"{loc.shown!r} exists and is not a ddr output; refusing to replace it"
                + ("" if loc.is_zarr() else " (it is not even a Zarr store)")
            )
    elif status == "complete":
        if if_exists == "skip-if-complete":
            stored = read_attrs(loc).get(FINGERPRINT_ATTR)
            if fingerprint is None or stored == fingerprint:
                return "skip"
        elif if_exists == "error":
            raise FileExistsError(
                f"the output {loc.shown!r} already exists and is complete; pass "
                "if_exists='overwrite' (--force) to replace it or 'skip-if-complete' to keep it"
            )
    elif if_exists == "error":
        raise FileExistsError(
            f"the output {loc.shown!r} exists but is INCOMPLETE (an interrupted run?); pass "
            "if_exists='overwrite' (--force) or 'skip-if-complete' to write it again"
        )
    loc.remove()
    return "write"


def _as_dataset(obj: Any, name: str | None, dims: tuple[str, ...] | None) -> xr.Dataset:
    if isinstance(obj, xr.Dataset):
        return obj
    if isinstance(obj, xr.DataArray):
        return obj.to_dataset(name=name or (str(obj.name) if obj.name is not None else "data"))
    if isinstance(obj, Mapping):
        return xr.Dataset({k: _as_dataarray(v, None) for k, v in obj.items()})
    return _as_dataarray(obj, dims).to_dataset(name=name or "data")


def _as_dataarray(v: Any, dims: tuple[str, ...] | None) -> xr.DataArray:
    if isinstance(v, xr.DataArray):
        return v
    arr = v if isinstance(v, da.Array) else np.asarray(v)
    if dims is None:
        dims = (
            ("sample", "feature")[: arr.ndim]
            if arr.ndim <= 2
            else tuple(f"dim_{i}" for i in range(arr.ndim))
        )
    return xr.DataArray(arr, dims=dims)


def _normalise(ds: xr.Dataset) -> xr.Dataset:
    """Regular dask chunks (equal except the last, so each maps onto one Zarr chunk) and
    variable-length strings (fixed-width unicode has no Zarr v3 specification)."""
    out = {}
    for vname, var in ds.variables.items():
        data = var.data
        if var.dtype.kind == "U":
            out[vname] = var.astype(object)
        elif isinstance(data, da.Array):
            target = tuple(max(c) if c else 1 for c in data.chunks)
            regular = all(
                all(x == t for x in c[:-1]) and (not c or c[-1] <= t)
                for c, t in zip(data.chunks, target, strict=True)
            )
            if not regular:
                out[vname] = var.copy(data=data.rechunk(target))
    return ds.assign(out) if out else ds


def history_line(argv: list[str] | None = None) -> str:
    """A CF ``history`` entry: UTC time, program and arguments (secrets removed)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return redact(f"{now}: {' '.join(argv if argv is not None else sys.argv)}")


@dataclass
class PendingOutput:
    """An output whose metadata is written and whose data is a dask ``Delayed`` (or None).

    Compute ``delayed`` (possibly together with other outputs, to share passes), then call
    :meth:`finalize` to check every chunk and mark the output complete. Chunks written by
    other means go through ``store`` (it holds the claim, when there is one).

    Parameters
    ----------
    path : Location
        Where the output is.
    delayed : Delayed or None
        The writes of its data; None when there is nothing left to write.
    attrs : dict
        Group attributes written when it is marked complete.
    skipped : bool, default False
        The output was complete already (``if_exists="skip-if-complete"``): nothing to do.
    store : zarr store, optional
        The output's store, through which every write checks the claim.
    claim : Claim, optional
        The run's claim on the output.
    """

    path: Location
    delayed: Any
    attrs: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    store: Any = None
    claim: Claim | None = None

    def finalize(self) -> None:
        """Check that every chunk of the output is written, then mark it complete."""
        if self.skipped:
            return
        with self.path.errors("write"):
            self._finalize()

    def _finalize(self) -> None:
        store = self.store if self.store is not None else self.path.store(read_only=False)
        with fenced(self.claim):
            check_claimed(self.path, self.claim, store)
            group = zarr.open_group(store, mode="r+")
            for name, arr in group.arrays():
                if arr.nchunks_initialized != arr.nchunks:
                    raise RuntimeError(
                        f"output {self.path.url!r}: array {name!r} has "
                        f"{arr.nchunks_initialized} of {arr.nchunks} chunks written; it stays "
                        "marked incomplete"
                    )
            mark_complete(group, self.attrs)


def fenced(claim: Claim | None) -> Any:
    """Hold the claim's fence (nothing without a claim)."""
    return claim.writing() if claim is not None else contextlib.nullcontext()


def claimed_store(loc: Location, claim: Claim | None) -> Any:
    """The store to write the output at ``loc`` through: every write checks ``claim``."""
    store = loc.store(read_only=False)
    if claim is None:
        return store
    from ddr.io.claimed_store import ClaimedStore

    return ClaimedStore(store, claim.ref)


def check_claimed(loc: Location, claim: Claim | None, store: Any) -> None:
    """Before marking an output complete: it still carries this claim's token (no other run
    rewrote it), and on object stores the completion write is made over the very version of
    its metadata that was checked."""
    if claim is None:
        return
    from ddr.io.claimed_store import metadata_version

    attrs, version = metadata_version(loc)
    if attrs.get(CLAIM_ATTR) != claim.token:
        raise ClaimLost(
            f"{loc.shown} was rewritten by another run since this run wrote its metadata; "
            "this run does not mark it complete"
        )
    if version is not None:
        store.expect("zarr.json", version)


def mark_complete(group: zarr.Group, attrs: Mapping[str, Any]) -> None:
    """Write ``attrs`` and the completion marker in one metadata write, then consolidate the
    metadata (never before: see the module docstring)."""
    group.update_attributes({**attrs, STATUS_ATTR: "complete"})
    with warnings.catch_warnings():
        # zarr says consolidated metadata is not in the v3 specification yet; xarray and
        # zarr-python read it, and other readers ignore it and read the arrays' own metadata
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        zarr.consolidate_metadata(group.store, path=group.path or None)


def write_zarr(
    obj: Any,
    path: PathLike,
    *,
    name: str | None = None,
    dims: tuple[str, ...] | None = None,
    if_exists: IfExists = "error",
    inputs: Iterable[PathLike] = (),
    attrs: Mapping[str, Any] | None = None,
    fingerprint: str | None = None,
    provenance: Mapping[str, Any] | None = None,
    encoding: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    claim: Claim | None = None,
) -> PendingOutput:
    """Write ``obj`` to a Zarr v3 group at ``path`` following the protocol of this module.

    Parameters
    ----------
    obj : Dataset, DataArray, dask array, numpy array, or mapping of name -> array
        What to write; lazy data is written by the active dask scheduler (workers write
        their own chunks).
    path : path-like, URL or Location
        The output group: a local path or a URL (``s3://``, ``gs://``, ``az://``,
        ``file://``, ``memory://``; ``http(s)`` is read-only).
    name : str, optional
        Variable name for a single array (default: the DataArray's name, else ``"data"``).
    dims : tuple of str, optional
        Dims for a bare array (default ``("sample", "feature")``).
    if_exists : {"error", "overwrite", "skip-if-complete"}
        What to do when ``path`` exists. ``skip-if-complete`` keeps a complete output whose
        fingerprint matches and rewrites anything else.
    inputs : iterable of path-like
        Inputs that must not be written into (inputs opened with :func:`ddr.io.open_input`
        are protected anyway).
    attrs : mapping, optional
        Extra group attributes.
    fingerprint : str, optional
        Identifies what produced the output; stored and compared by ``skip-if-complete``.
    provenance : mapping, optional
        Stored under ``ddr:provenance`` (resolved pipeline, versions, input fingerprints).
    encoding : mapping, optional
        Per-variable xarray encoding (e.g. compressors). Every variable's compressors end
        with the ``crc32c`` checksum codec (``ddr.io.checksums``), verified on read.
    compute : bool
        Compute and finalize now (default). With ``False``, compute the returned
        :class:`PendingOutput`'s ``delayed`` yourself, then call its ``finalize()``.
    storage_options : mapping, optional
        Options of the URL's filesystem (credentials, ``endpoint_url``, ...).
    claim : Claim, optional
        This run's claim on ``path`` (``ddr.io.claims``): every write checks it, and the
        output is marked complete only if no other run has taken it over.

    Returns
    -------
    PendingOutput
    """
    p = resolve(path, storage_options)
    check_not_input(p, inputs)
    with fenced(claim):
        if _prepare(p, if_exists, fingerprint) == "skip":
            return PendingOutput(p, None, skipped=True)
        ds = _normalise(_as_dataset(obj, name, dims))
        ds.attrs = {**ds.attrs, **(attrs or {}), STATUS_ATTR: "incomplete"}
        if claim is not None:
            ds.attrs[CLAIM_ATTR] = claim.token
        final_attrs = _final_attrs(ds.attrs, fingerprint, provenance)
        enc = checksummed_encoding(ds.variables, encoding)
        store = claimed_store(p, claim)
        with p.errors("write"):
            delayed = ds.to_zarr(
                store,
                mode="w-",
                compute=False,
                zarr_format=3,
                consolidated=False,
                write_empty_chunks=True,
                encoding=enc,
            )
    pending = PendingOutput(p, delayed, final_attrs, store=store, claim=claim)
    if compute:
        dask.compute(delayed)
        pending.finalize()
    return pending


def _final_attrs(
    attrs: Mapping[str, Any], fingerprint: str | None, provenance: Mapping[str, Any] | None
) -> dict[str, Any]:
    from ddr._version import __version__

    history = str(attrs.get("history", ""))
    line = history_line()
    out: dict[str, Any] = {
        "history": f"{history}\n{line}" if history else line,
        "ddr:version": __version__,
    }
    if fingerprint is not None:
        out[FINGERPRINT_ATTR] = fingerprint
    if provenance is not None:
        out[PROVENANCE_ATTR] = redact(dict(provenance))
    return out
