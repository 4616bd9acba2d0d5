"""What ddr's chunk reader needs from zarr beyond its public API, found in the installed zarr.

zarr has no public way to fetch one stored chunk or to decode it without a copy (zarr-python
issues 2904 and 3429), so :mod:`ddr.io.zarr_chunks` asks the installed zarr for:

- a chunk's store key: ``Array.metadata.encode_chunk_key`` (zarr 3.0 onwards, v2 and v3);
- its bytes, and whether it is stored: ``Array.store_path`` (a public
  :class:`zarr.storage.StorePath`), awaited on zarr's own event loop (``zarr.core.sync.sync``);
- for the codec chains ddr does not decode itself, zarr's codec pipeline
  (``Array.async_array.codec_pipeline``) and the chunk's ``ArraySpec``. zarr 3.1 had
  ``metadata.get_chunk_spec`` for it; zarr 3.2 removed it and builds
  ``ArraySpec(chunk_shape, dtype, fill_value, config, prototype)`` for a regular grid
  itself, so ddr builds it the same way on every version.

Each of these is looked up, not assumed: a zarr that lacks one gives the reason, and the
reader warns once (:func:`warn_once`) and reads through zarr's public slicing instead.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np
import zarr
from zarr.buffer import default_buffer_prototype

try:
    from zarr.core.sync import sync
except ImportError:  # pragma: no cover - depends on the installed zarr
    sync = None
try:
    from zarr.core.array_spec import ArraySpec
except ImportError:  # pragma: no cover - depends on the installed zarr
    ArraySpec = None

__all__ = [
    "chunk_key",
    "direct_unavailable",
    "fetch",
    "pipeline_decode",
    "pipeline_unavailable",
    "stored",
    "warn_once",
]

logger = logging.getLogger(__name__)

# the zarr versions the CI runs the whole suite with (README: "Supported zarr versions")
TESTED_ZARR = "3.1 to 3.4"


def direct_unavailable(z: zarr.Array) -> str | None:
    """Why ddr cannot fetch ``z``'s stored chunks itself with this zarr; None when it can.

    Parameters
    ----------
    z : zarr.Array

    Returns
    -------
    str or None
        What the installed zarr lacks, in words.
    """
    if not callable(getattr(z.metadata, "encode_chunk_key", None)):
        return f"{type(z.metadata).__name__} has no encode_chunk_key"
    store_path = getattr(z, "store_path", None)
    if not all(hasattr(store_path, a) for a in ("store", "path", "__truediv__")):
        return "zarr.Array.store_path is not a StorePath"
    if sync is None:
        return "zarr.core.sync.sync is gone"
    return None


def pipeline_unavailable(z: zarr.Array) -> str | None:
    """Why zarr's codec pipeline cannot decode ``z``'s chunks for ddr; None when it can."""
    inner = getattr(z, "async_array", None)
    if not callable(getattr(getattr(inner, "codec_pipeline", None), "decode", None)):
        return "zarr.Array.async_array.codec_pipeline has no decode"
    if ArraySpec is None:
        return "zarr.core.array_spec.ArraySpec is gone"
    try:
        _chunk_spec(z)
    except (AttributeError, TypeError, ValueError, NotImplementedError) as e:
        return f"a chunk's ArraySpec cannot be built ({type(e).__name__}: {e})"
    return None


def chunk_key(z: zarr.Array, coords: tuple[int, ...]) -> str:
    """The key of the chunk at ``coords``, relative to ``z.store_path``."""
    return z.metadata.encode_chunk_key(coords)


def fetch(store_path: Any, key: str) -> Any:
    """The buffer stored under ``key`` below ``store_path``, None if there is none."""
    return sync((store_path / key).get(prototype=default_buffer_prototype()))


def stored(store_path: Any, key: str) -> bool:
    """Whether something is stored under ``key`` below ``store_path`` (nothing is read)."""
    return bool(sync((store_path / key).exists()))


def pipeline_decode(z: zarr.Array, raw: Any) -> np.ndarray | None:
    """The chunk stored as ``raw`` (a zarr buffer), decoded by ``z``'s codec pipeline, full
    chunk shape; None if zarr decodes it to another shape or dtype than ``z``'s."""

    async def decode() -> Any:
        (out,) = await z.async_array.codec_pipeline.decode([(raw, _chunk_spec(z))])
        return out

    decoded = sync(decode())
    if decoded is None:
        return None
    chunk = decoded.as_numpy_array()
    if chunk.shape != tuple(z.chunks) or chunk.dtype != z.dtype:
        return None
    return chunk


def _chunk_spec(z: zarr.Array) -> Any:
    """The ``ArraySpec`` zarr decodes every chunk of the regular grid of ``z`` with."""
    meta = z.metadata
    return ArraySpec(
        shape=tuple(z.chunks),
        dtype=meta.dtype,
        fill_value=meta.fill_value,
        config=z.async_array.config,
        prototype=default_buffer_prototype(),
    )


@functools.cache
def warn_once(reason: str, consequence: str) -> None:
    """Log, once per process for each reason, that ddr's reader is slower with this zarr.

    Parameters
    ----------
    reason : str
        What the installed zarr lacks (from :func:`direct_unavailable` or
        :func:`pipeline_unavailable`).
    consequence : str
        How the chunks are read instead.
    """
    logger.warning(
        "ddr's direct Zarr chunk reader is not available with zarr %s (%s): %s. "
        "Supported and tested: zarr %s.",
        zarr.__version__,
        reason,
        consequence,
        TESTED_ZARR,
    )
