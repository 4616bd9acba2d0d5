"""Small files that pipelines write whole: JSON (metrics, run summaries), numpy values
converted, secrets redacted, the output fingerprint under ``ddr:fingerprint``.

Every file is written whole or not at all (:meth:`ddr.io.locations.Location.write_bytes`:
locally to a temporary name renamed into place, on an object store in one PUT), so a crash
never leaves a half-written file; paths may be URLs.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ddr.io.locations import Location, redact, resolve

__all__ = ["FINGERPRINT_KEY", "PROVENANCE_KEY", "json_bytes", "jsonable", "write_json"]

#: where a file keeps the fingerprint of the output it is (a JSON key, a PNG text chunk)
FINGERPRINT_KEY = "ddr:fingerprint"
#: where a file keeps its provenance
PROVENANCE_KEY = "ddr:provenance"

PathLike = str | os.PathLike | Location


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays, scalars and DataArrays as lists and numbers (non-finite
    floats as their ``repr``)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "values") and hasattr(value, "dims"):  # DataArray
        return jsonable(np.asarray(value.values))
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return repr(value)
    return value


def json_bytes(data: dict[str, Any], fingerprint: str | None) -> bytes:
    """``data`` (numpy values converted, secrets redacted) as JSON, with the fingerprint."""
    body = redact(jsonable(data))
    if fingerprint is not None:
        body[FINGERPRINT_KEY] = fingerprint
    return (json.dumps(body, indent=2, sort_keys=False) + "\n").encode("utf-8")


def write_json(path: PathLike, data: dict[str, Any], fingerprint: str | None) -> None:
    """Write ``data`` as JSON (:func:`json_bytes`), whole or not at all."""
    resolve(path).write_bytes(json_bytes(data, fingerprint))
