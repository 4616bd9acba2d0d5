"""What a store holds, for ``ddr inspect``: a Zarr group's arrays, sparse groups and
attributes, and the claim a run holds on it.

Generic store reading, below the pipeline: the output kinds that are Zarr groups
(:class:`ddr.pipeline.outputs.StoreKind`) show what these functions read.
"""

from __future__ import annotations

from typing import Any

from ddr.io.locations import Location
from ddr.io.outputs import PROVENANCE_ATTR

__all__ = ["claim_info", "describe_group"]


def claim_info(p: Location) -> dict[str, Any] | None:
    """The claim a run holds on the output at ``p`` (:mod:`ddr.io.claims`), if any."""
    from ddr.io.claims import ClaimRecord, claim_location

    where = claim_location(p)
    try:
        record = ClaimRecord.from_bytes(where.read_bytes())
    except (FileNotFoundError, IsADirectoryError):
        return None
    if record is None:
        return None
    return {"by": record.describe(), "stale": record.stale()}


def describe_group(p: Location) -> dict[str, Any]:
    """What a Zarr group holds, for ``ddr inspect``: its arrays (shape, dims, dtype, chunks
    written), sparse (CSR) groups, ddr's attributes, the provenance and other attributes;
    ``error`` when it cannot be opened."""
    import zarr

    from ddr.io.csr import is_csr_group
    from ddr.io.locations import redact

    info: dict[str, Any] = {}
    try:
        with p.errors("read"):
            group = zarr.open_group(p.store(), mode="r")
    except Exception as exc:
        info["error"] = redact(f"{type(exc).__name__}: {exc}")
        return info
    attrs = group.attrs.asdict()
    arrays = {}
    for name, arr in sorted(group.arrays()):
        dims = getattr(arr.metadata, "dimension_names", None)
        arrays[name] = {
            "shape": list(arr.shape),
            "dims": list(dims) if dims else None,
            "dtype": str(arr.dtype),
            "chunks": list(arr.chunks),
            "chunks_written": f"{arr.nchunks_initialized}/{arr.nchunks}",
        }
    info["arrays"] = arrays
    sparse = {
        name: {
            "shape": sub.attrs.get("shape"),
            "dtype": str(sub["data"].dtype) if "data" in sub else None,
            "stored_values": int(sub["data"].shape[0]) if "data" in sub else None,
        }
        for name, sub in sorted(group.groups())
        if is_csr_group(sub)
    }
    if sparse:
        info["sparse"] = sparse
    for key in ("ddr:model", "ddr:fingerprint", "ddr:version", "history"):
        if key in attrs:
            info[key.removeprefix("ddr:")] = attrs[key]
    prov = attrs.get(PROVENANCE_ATTR)
    if isinstance(prov, dict):
        info["provenance"] = {
            "pipeline": {k: v for k, v in prov.get("pipeline", {}).items() if k != "resolved"},
            "from": prov.get("output", {}).get("from"),
            "steps": {k: v.get("op") for k, v in prov.get("steps", {}).items()},
            "inputs": prov.get("inputs"),
            "versions": prov.get("versions"),
            "run": prov.get("run"),
        }
    other = {
        k: v
        for k, v in attrs.items()
        if not k.startswith("ddr:") and k not in ("history", "params", "state")
    }
    if other:
        info["attrs"] = other
    return info
