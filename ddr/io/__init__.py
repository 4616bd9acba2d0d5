"""Zarr and xarray inputs and outputs, and model persistence.

- :func:`open_input`: a Zarr array or group member (v2/v3) or a netCDF variable, lazily;
  missing chunks are refused (:class:`MissingChunksError`) unless ``missing_chunks="fill"``,
  and so is a group whose consolidated metadata is stale (:class:`StaleConsolidatedMetadata`)
  and metadata that is corrupt or describes too many chunks (:class:`InputMetadataError`).
- :func:`from_zarr`: :func:`dask.array.from_zarr`, each chunk read and decoded once, no copy.
- :func:`open_csr`: a CSR group (AnnData's layout) as a dask array of scipy.sparse row blocks.
- :func:`write_zarr`: outputs that never look complete when they are not.
- :func:`output_status`, :func:`read_attrs`: what an output holds and whether it is complete.
- :func:`save_model` / :func:`load`: estimators to Zarr groups and back, no pickle; a model
  that cannot be read back as saved is a :class:`CorruptModelError` (:func:`check_model`
  checks its metadata alone).
"""

from ddr.io.consolidated import StaleConsolidatedMetadata
from ddr.io.csr import open_csr
from ddr.io.inputs import describe_input, open_input, opened_inputs
from ddr.io.models import CorruptModelError, check_model, load, save_model
from ddr.io.outputs import (
    STATUS_ATTR,
    PendingOutput,
    check_not_input,
    output_status,
    read_attrs,
    write_zarr,
)
from ddr.io.stored_chunks import InputMetadataError, MissingChunksError
from ddr.io.zarr_chunks import CorruptChunkError, from_zarr

__all__ = [
    "STATUS_ATTR",
    "CorruptChunkError",
    "CorruptModelError",
    "InputMetadataError",
    "MissingChunksError",
    "PendingOutput",
    "StaleConsolidatedMetadata",
    "check_model",
    "check_not_input",
    "describe_input",
    "from_zarr",
    "load",
    "open_csr",
    "open_input",
    "opened_inputs",
    "output_status",
    "read_attrs",
    "save_model",
    "write_zarr",
]
