"""Output kinds that are a Zarr group (arrays, saved models).

The driver writes the group's metadata, the workers (or the driver) the chunks, and the
completion marker comes last with the fingerprint and the provenance, in one metadata
write (:mod:`ddr.io.outputs`): the status is read from the group's metadata document. A
complete group at an output's path may be a dataset or another pipeline's output, which a
run never replaces without ``--force``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddr.io.inspect import claim_info, describe_group
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
