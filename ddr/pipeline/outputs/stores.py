"""Output kinds that are a Zarr group (arrays, saved models).

The driver writes the group's metadata, the workers (or the driver) the chunks, and the
completion marker comes last with the fingerprint and the provenance, in one metadata
write (:mod:`ddr.io.outputs`): the status is read from the group's metadata document. A
complete group at an output's path may be a dataset or another pipeline's output, which a
run never replaces without ``--force``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddr.io.outputs import FINGERPRINT_ATTR, PROVENANCE_ATTR
from ddr.pipeline.lineage import stored_provenance
from ddr.pipeline.outputs.base import OutputKind, Probe

if TYPE_CHECKING:
    from ddr.io.locations import Location

__all__ = ["StoreKind", "claim_info", "describe_group"]


class StoreKind(OutputKind):
    """An output that is a Zarr group with ddr's completion marker."""

    def status(self, location: Location) -> tuple[str, str | None]:
        from ddr.io import output_status, read_attrs

        status = output_status(location)
        stored = None
        if status == "complete":
            stored = read_attrs(location).get(FINGERPRINT_ATTR)
        return status, stored

    def read_provenance(self, location: Location) -> dict[str, Any] | None:
        return stored_provenance(location)

    def written_elsewhere(self, location: Location, pipeline: Any) -> str | None:
        from ddr.io import read_attrs

        try:
            attrs = read_attrs(location)
        except (OSError, ValueError, KeyError):
            return "a store whose attributes cannot be read"
        prov = attrs.get(PROVENANCE_ATTR)
        name = prov.get("pipeline", {}).get("name") if isinstance(prov, dict) else None
        if name is not None and name == pipeline:
            return None
        if "ddr:demo" in attrs:
            return "a dataset written by ddr demo-data"
        if name is not None:
            return f"an output of the pipeline {name!r}"
        if "ddr:model" in attrs:
            return f"a {attrs['ddr:model']} model saved outside a pipeline"
        return "a store written by ddr outside a pipeline"

    def recognizes(self, probe: Probe) -> int:
        return 0 if probe.is_file else 1  # any folder or store: its status says the rest

    def inspect(self, probe: Probe) -> dict[str, Any]:
        from ddr.io import output_status

        p = probe.location
        info: dict[str, Any] = {"status": output_status(p)}
        claim = claim_info(p)
        if claim is not None:
            info["claim"] = claim
        if p.is_zarr():
            info.update(describe_group(p))
        return info


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
