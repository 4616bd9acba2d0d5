"""Output kinds: one class per ``kind:`` of pipeline output, and their registry.

:mod:`ddr.pipeline.outputs.base` says what a kind is; the built-in kinds are
:mod:`~ddr.pipeline.outputs.zarr`, :mod:`~ddr.pipeline.outputs.model`,
:mod:`~ddr.pipeline.outputs.metrics`, :mod:`~ddr.pipeline.outputs.plot` (whose plots are
:mod:`ddr.pipeline.outputs.plots`) and :mod:`~ddr.pipeline.outputs.cv_results`.
Importing this package registers them, in the order messages and docs list them. A new
kind is one class registered with :func:`register_output_kind`; :func:`output_kind` and
:func:`kind_at` are how the rest of ddr finds one.
"""

from ddr.io.locations import resolve
from ddr.pipeline.outputs.base import (
    CheckContext,
    OutputKind,
    OutputSpec,
    Probe,
    Streamed,
    WriteContext,
    kind_at,
    output_kind,
    output_kinds,
    register_output_kind,
    unregister_output_kind,
)
from ddr.pipeline.outputs.files import FileKind
from ddr.pipeline.outputs.stores import StoreKind

# the order of registration is the order messages and docs list the kinds
# isort: off
from ddr.pipeline.outputs.zarr import ZarrKind, ZarrOutput
from ddr.pipeline.outputs.model import ModelKind, ModelOutput
from ddr.pipeline.outputs.metrics import MetricsKind, MetricsOutput
from ddr.pipeline.outputs.plot import PlotOutputKind
from ddr.pipeline.outputs.cv_results import CvResultsKind, CvResultsOutput
# isort: on

__all__ = [
    "CheckContext",
    "CvResultsKind",
    "CvResultsOutput",
    "FileKind",
    "MetricsKind",
    "MetricsOutput",
    "ModelKind",
    "ModelOutput",
    "OutputKind",
    "OutputSpec",
    "PlotOutputKind",
    "Probe",
    "StoreKind",
    "Streamed",
    "WriteContext",
    "ZarrKind",
    "ZarrOutput",
    "kind_at",
    "output_kind",
    "output_kinds",
    "read_fingerprint",
    "register_output_kind",
    "unregister_output_kind",
]


def read_fingerprint(path: object) -> str | None:
    """The fingerprint of the complete ddr output at ``path`` (a path, URL or
    :class:`~ddr.io.locations.Location`), whatever its kind; None when there is none."""
    kind, probe = kind_at(resolve(path))  # type: ignore[arg-type]
    if kind is None:
        return None
    status, fingerprint = kind.status(probe.location)
    return fingerprint if status == "complete" else None
