"""What a stored Zarr array looked like, chunk by chunk, without reading a value: the record
a run keeps of each input so that a later run can tell rows appended from rows changed.

:func:`array_record` takes one listing of the array's stored objects (chunks, or shards
where the array is sharded) and keeps, for each, a *token*: its size and its modification
time on a local disk, its size and ETag (or last-modified time) on an object store. Nothing
of the values is read, so recording an input costs what ``ls`` costs.

Why tokens from the listing rather than a hash of the bytes: a hash needs every byte read,
which is the full pass an update exists to avoid; the CRC32C that ddr writes at the end of
its own chunks needs one ranged read per chunk, and inputs are mostly written by other
tools. A token changes whenever an object is rewritten, even with the same bytes: a
false alarm forces a full run (safe), a missed change cannot happen unless a tool rewrites
an object keeping its size and its modification time (``cp -p`` of other data, a
filesystem whose clock is coarser than the rewrite), which the docs name.

:func:`compare_records` says what happened between two records of the same array: nothing,
rows appended along the sample axis (every object of the old complete row blocks as it
was), or a change, naming the first object that differs.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ddr.io.locations import Location

__all__ = ["ArrayRecord", "Growth", "array_record", "compare_records"]

_METADATA = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")


@dataclass(frozen=True)
class ArrayRecord:
    """A stored array's shape, grid and objects, as one listing shows them.

    Attributes
    ----------
    shape : tuple of int
        The stored shape.
    dtype : str
        The stored dtype.
    axis : int
        The sample axis in the stored order.
    block_rows : int
        Rows per stored object along the sample axis (the shard, else the chunk).
    objects : dict of str -> str
        Each stored object's key relative to the array (``c/3/0``) and its token.
    """

    shape: tuple[int, ...]
    dtype: str
    axis: int
    block_rows: int
    objects: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """The stored length along the sample axis."""
        return int(self.shape[self.axis])

    @property
    def full_blocks(self) -> int:
        """How many row blocks are complete (every row of them stored)."""
        return self.rows // self.block_rows

    def to_dict(self) -> dict[str, Any]:
        """JSON values (what the run's state keeps)."""
        out = asdict(self)
        out["shape"] = list(self.shape)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArrayRecord:
        """The record :meth:`to_dict` gave."""
        return cls(
            tuple(int(s) for s in data["shape"]),
            str(data["dtype"]),
            int(data["axis"]),
            int(data["block_rows"]),
            {str(k): str(v) for k, v in dict(data.get("objects") or {}).items()},
        )


@dataclass(frozen=True)
class Growth:
    """What happened to a stored array between two records.

    Attributes
    ----------
    status : {"same", "appended", "changed"}
        ``same``: every object as it was; ``appended``: rows added along the sample axis and
        every object of the old complete row blocks as it was (the old last block, when it
        was partial, may have been rewritten to take the first new rows); ``changed``:
        anything else.
    old_rows, rows : int
        The stored length along the sample axis then and now.
    dirty_from : int
        The first stored row whose block may differ from then: ``rows`` when nothing did.
    why : str
        In words, naming the object that differs for ``changed``.
    """

    status: str
    old_rows: int
    rows: int
    dirty_from: int
    why: str = ""


def array_record(loc: Location, array: str | None, sample_dim: str | None) -> ArrayRecord | None:
    """The record of the Zarr array ``array`` inside the store at ``loc`` (one listing).

    Parameters
    ----------
    loc : Location
        The store.
    array : str, optional
        The array's path inside the store (None: the store is the array).
    sample_dim : str, optional
        The name of the sample dim (its axis is read from the array's dimension names;
        the first axis when it has none).

    Returns
    -------
    ArrayRecord or None
        None where ``loc`` holds no Zarr array there (a netCDF file, a CSR group).
    """
    import zarr

    if not loc.is_zarr():
        return None
    try:
        with loc.errors("read"):
            z = zarr.open_array(store=loc.store(), path=array or "", mode="r")
    except (OSError, PermissionError, TimeoutError, ConnectionError):
        raise
    except Exception:  # a group (CSR) or something zarr cannot open as an array
        return None
    names: Any = getattr(z.metadata, "dimension_names", None) or z.attrs.get("_ARRAY_DIMENSIONS")
    axis = 0
    if isinstance(names, list | tuple) and sample_dim in list(names):
        axis = list(names).index(sample_dim)
    grid = tuple(z.shards or z.chunks)
    base = loc.joinpath(array) if array else loc
    return ArrayRecord(
        tuple(int(s) for s in z.shape),
        str(z.dtype),
        axis,
        int(grid[axis]),
        dict(_tokens(base)),
    )


def _tokens(base: Location) -> list[tuple[str, str]]:
    """``(key, token)`` of every stored object under ``base``, metadata documents left out."""
    out = []
    if base.protocol == "file":
        top = Path(base.path)
        for f in top.rglob("*"):
            if f.is_file() and f.name not in _METADATA:
                st = f.stat()
                out.append((f.relative_to(top).as_posix(), f"{st.st_size}:{st.st_mtime_ns}"))
        return sorted(out)
    with base.errors("read"):
        found = base.fs.find(base.fs_path, detail=True)
    prefix = base.fs_path.rstrip("/") + "/"
    for key, info in found.items():
        if os.path.basename(key) in _METADATA:
            continue
        stamp = next(
            (
                str(info[k])
                for k in ("ETag", "etag", "md5Hash", "LastModified", "last_modified", "mtime")
                if info.get(k) is not None
            ),
            "",
        )
        out.append((key.removeprefix(prefix).lstrip("/"), f"{int(info.get('size') or 0)}:{stamp}"))
    return sorted(out)


def _block_of(key: str, axis: int) -> int | None:
    """The index along the sample axis of an object's key (``c/3/0`` -> 3 for axis 0;
    v2 keys ``3.0`` too); None for a key that is not a chunk's."""
    body = key[2:] if key[:2] in ("c/", "c.") else key
    try:
        coords = [int(part) for part in re.split(r"[./]", body)]
    except ValueError:
        return None
    return coords[axis] if axis < len(coords) else None


def compare_records(old: ArrayRecord, new: ArrayRecord, shown: str = "") -> Growth:
    """What happened to the array between the records ``old`` and ``new``.

    Parameters
    ----------
    old, new : ArrayRecord
        The records then and now.
    shown : str
        The array's name in messages (``X`` or ``data.zarr/X``).

    Returns
    -------
    Growth
    """
    at = f"{shown}/" if shown else ""
    n0, n1 = old.rows, new.rows
    if (old.axis, old.block_rows, old.dtype) != (new.axis, new.block_rows, new.dtype):
        return Growth(
            "changed",
            n0,
            n1,
            0,
            f"{shown or 'the array'} was rewritten with another layout (dtype {old.dtype} -> "
            f"{new.dtype}, rows per block {old.block_rows} -> {new.block_rows})",
        )
    other_old = old.shape[: old.axis] + old.shape[old.axis + 1 :]
    other_new = new.shape[: new.axis] + new.shape[new.axis + 1 :]
    if other_old != other_new:
        return Growth(
            "changed", n0, n1, 0, f"{shown or 'the array'}: shape {old.shape} -> {new.shape}"
        )
    if n1 < n0:
        return Growth("changed", n0, n1, 0, f"{shown or 'the array'} shrank: {n0} -> {n1} rows")
    full = old.full_blocks
    # every object of the complete old row blocks must be as it was, and none added there
    for key in sorted(set(old.objects) | set(new.objects), key=_natural):
        block = _block_of(key, old.axis)
        if block is None or block >= full:
            continue
        was, now = old.objects.get(key), new.objects.get(key)
        if was == now:
            continue
        what = "removed" if now is None else "written (it was not stored)" if was is None else None
        return Growth(
            "changed",
            n0,
            n1,
            block * old.block_rows,
            f"chunk {at}{key} was {what or 'rewritten'} since the last run (rows "
            f"{block * old.block_rows}-{min((block + 1) * old.block_rows, n0) - 1})",
        )
    partial = {k: v for k, v in old.objects.items() if _block_of(k, old.axis) == full}
    partial_now = {k: v for k, v in new.objects.items() if _block_of(k, new.axis) == full}
    if n1 == n0 and partial == partial_now:
        return Growth("same", n0, n1, n1)
    if n1 == n0:
        key = next(iter(sorted(set(partial) ^ set(partial_now) or set(partial), key=_natural)))
        return Growth(
            "changed",
            n0,
            n1,
            full * old.block_rows,
            f"chunk {at}{key} was rewritten since the last run, and no rows were appended",
        )
    return Growth("appended", n0, n1, full * old.block_rows)


def _natural(key: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", key))
