"""A CRC32C checksum on every chunk ddr writes, verified on every read.

Zstd does not notice every damaged frame (a flipped bit in a literal decodes to another
value), and nothing notices two chunk files swapped: both decode. Zarr v3's ``crc32c`` codec
appends the CRC32C of the encoded chunk to it, and zarr checks it when it decodes the chunk,
so a damaged or misplaced chunk of an output or a saved model is an error on read, never
data. ddr writes its outputs (:func:`ddr.io.write_zarr`) and models (:func:`ddr.io.save_model`)
with it; ddr's own chunk reader (:mod:`ddr.io.chunk_decode`) verifies it as zarr does.
The checksum costs 4 bytes a chunk and about 0.1 ms per MB (hardware CRC32C,
``google-crc32c``, which zarr itself requires).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import google_crc32c
import numpy as np

__all__ = [
    "ChecksumMismatch",
    "checksummed_compressors",
    "checksummed_encoding",
    "values_crc32c",
    "verified",
]


class ChecksumMismatch(ValueError):
    """A stored chunk's CRC32C differs from that of its bytes (a damaged copy)."""


def checksummed_compressors(compressors: Any = "default") -> tuple[Any, ...]:
    """The bytes-to-bytes codecs of a Zarr v3 array ending with the ``crc32c`` codec.

    Parameters
    ----------
    compressors : "default", None, codec or sequence of codecs
        What to compress with before the checksum: ``"default"`` is zarr's default (zstd
        level 0), None none.

    Returns
    -------
    tuple of codecs
        For zarr's ``compressors=`` (of ``create_array``, or an xarray encoding).
    """
    from zarr.codecs import Crc32cCodec, ZstdCodec

    if isinstance(compressors, str) and compressors in ("default", "auto"):
        given: tuple[Any, ...] = (ZstdCodec(level=0, checksum=False),)
    elif compressors is None:
        given = ()
    elif isinstance(compressors, (list, tuple)):
        given = tuple(compressors)
    else:
        given = (compressors,)
    if any(isinstance(c, Crc32cCodec) for c in given):
        return given
    return (*given, Crc32cCodec())


def checksummed_encoding(
    variables: Any, encoding: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """An xarray ``to_zarr`` encoding in which every variable of ``variables`` (names) ends
    its compressors with the ``crc32c`` codec; compressors a variable's encoding names are
    kept before it."""
    out = {k: dict(v) for k, v in (encoding or {}).items()}
    for name in variables:
        enc = out.setdefault(str(name), {})
        enc["compressors"] = checksummed_compressors(enc.get("compressors", "default"))
    return out


def verified(raw: np.ndarray, where: str = "the chunk") -> np.ndarray:
    """The bytes of a chunk encoded with a trailing ``crc32c`` codec, without the checksum,
    after checking it.

    Parameters
    ----------
    raw : ndarray of uint8, shape (n_bytes,)
        The stored chunk.
    where : str
        What the chunk is, for the error.

    Raises
    ------
    ChecksumMismatch
        The checksum does not match (or the chunk is shorter than one).
    """
    if raw.shape[0] < 4:
        raise ChecksumMismatch(f"{where} has {raw.shape[0]} bytes, fewer than its checksum")
    body = raw[:-4]
    stored = int.from_bytes(raw[-4:].tobytes(), "little")
    computed = google_crc32c.value(np.ascontiguousarray(body))
    if stored != computed:
        raise ChecksumMismatch(
            f"the CRC32C checksum of {where} does not match its bytes (stored {stored:#010x}, "
            f"computed {computed:#010x})"
        )
    return body


def values_crc32c(arr: np.ndarray) -> int:
    """The CRC32C of an array's values in C order (what a saved model records of each of its
    arrays, so that one replaced by another that decodes is found)."""
    data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return int(google_crc32c.value(data))
