"""Whether a group's consolidated metadata agrees with the metadata of the arrays it copies.

Consolidated metadata (``zarr.consolidate_metadata``; ``ddr demo-data`` and xarray's
``to_zarr`` write it) is a copy of every array's metadata in the group's own document, so a
store opens with one read. Nothing keeps the copy current: an append that resized an array
but was interrupted before the group was consolidated again leaves the array's ``zarr.json``
saying 25 000 rows and the group's copy 20 000. Which one a reader believes depends on how it
opens the store (zarr uses the copy when there is one, xarray with ``consolidated=False``
does not), and rows that were never written are read as the fill value. ddr refuses such an
input, naming both documents, before anything is read.
"""

from __future__ import annotations

from typing import Any

import zarr

__all__ = ["StaleConsolidatedMetadata", "check_consolidated"]

# the metadata fields that change what a read returns (attributes are compared apart)
_SHOWN_FIELDS = ("shape", "chunk_grid", "chunks", "data_type", "dtype", "fill_value", "codecs")


class StaleConsolidatedMetadata(ValueError):
    """A group's consolidated copy of an array's metadata differs from the array's own.

    Parameters
    ----------
    where : str
        The store as messages name it.
    group : str
        The path of the group holding the consolidated copy (``""``: the root).
    array : str
        The array's path in the store.
    diffs : dict
        Field -> (the array's own value, the consolidated copy's value).
    v2 : bool
        A Zarr v2 store (its documents are ``.zarray`` and ``.zmetadata``).

    Attributes
    ----------
    array : str
        The array's path in the store.
    fields : list of str
        The metadata fields that differ.
    """

    def __init__(
        self, where: str, group: str, array: str, diffs: dict[str, tuple[Any, Any]], v2: bool
    ) -> None:
        self.array = array
        self.fields = list(diffs)
        said = "; ".join(
            f"{field} {mine!r} in its own metadata, {theirs!r} in the consolidated copy"
            for field, (mine, theirs) in diffs.items()
        )
        own = f"{array}/{'.zarray' if v2 else 'zarr.json'}"
        copy = f"{group + '/' if group else ''}{'.zmetadata' if v2 else 'zarr.json'}"
        super().__init__(
            f"the array {array!r} of {where} has stale consolidated metadata: {said} ({own} "
            f"against {copy}). An append or a rewrite was interrupted before the group was "
            "consolidated again, and rows it describes may never have been written. Check "
            "the array, then consolidate again (zarr.consolidate_metadata) or rewrite it"
        )


def check_consolidated(store: Any, array: str, where: str) -> None:
    """Raise :class:`StaleConsolidatedMetadata` if a group above ``array`` in ``store`` holds
    consolidated metadata that differs from ``array``'s own.

    Parameters
    ----------
    store : zarr store
        The store, opened read-only.
    array : str
        The array's path in the store (``"X"``, ``"group/X"``).
    where : str
        The store as messages name it (redacted).
    """
    own = zarr.open_array(store=store, path=array, mode="r").metadata.to_dict()
    parts = array.split("/")
    for depth in range(len(parts)):
        group_path = "/".join(parts[:depth])
        try:
            group = zarr.open_group(store=store, path=group_path, mode="r")
        except (FileNotFoundError, KeyError, ValueError, zarr.errors.GroupNotFoundError):
            continue
        copies = _flattened(group)
        entry = copies.get("/".join(parts[depth:])) if copies is not None else None
        if entry is None:
            continue
        diffs = _differences(own, entry.to_dict())
        if diffs:
            raise StaleConsolidatedMetadata(
                where, group_path, array, diffs, v2=own.get("zarr_format") == 2
            )


def _flattened(group: zarr.Group) -> dict[str, Any] | None:
    """The group's consolidated metadata by path below it, or None if it has none."""
    consolidated = getattr(group.metadata, "consolidated_metadata", None)
    if consolidated is None:
        return None
    flat = getattr(consolidated, "flattened_metadata", None)
    return dict(flat if flat is not None else consolidated.metadata)


def _differences(own: dict[str, Any], copy: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Fields whose values differ between an array's metadata and its consolidated copy
    (every field but the attributes, and the attributes as one)."""
    keys = (set(own) | set(copy)) - {"attributes"}
    diffs = {k: (own.get(k), copy.get(k)) for k in keys if _norm(own.get(k)) != _norm(copy.get(k))}
    if _norm(own.get("attributes") or {}) != _norm(copy.get("attributes") or {}):
        diffs["attributes"] = ("...", "...")
    ordered = {k: diffs[k] for k in _SHOWN_FIELDS if k in diffs}
    ordered.update({k: v for k, v in diffs.items() if k not in ordered})
    return ordered


def _norm(value: Any) -> str:
    """A value as JSON text (tuples as lists, NaN equal to NaN), for comparison."""
    import json

    return json.dumps(value, default=str, sort_keys=True)
