"""What is at a path, as ``ddr inspect`` shows it: a ddr output read by its kind.

Nothing at the path (or an empty folder, what a full disk can leave: nobody's output) is
``missing``; a file that no output kind recognises is ``not-ddr``; anything else is shown as
the kind most sure of it reads it (:func:`ddr.pipeline.outputs.kind_at`,
:meth:`OutputKind.inspect <ddr.pipeline.outputs.OutputKind.inspect>`), whose Zarr groups are
read by :mod:`ddr.io.inspect`.
"""

from __future__ import annotations

from typing import Any

from ddr.io.locations import Location, redact, resolve

__all__ = ["inspect_output"]


def inspect_output(path: str | Location) -> dict[str, Any]:
    """What is at ``path`` and whether it is complete.

    Parameters
    ----------
    path : str or Location
        A local path or a URL (credentials from the environment), or a location.

    Returns
    -------
    dict
        ``path`` (secrets redacted), ``status`` (``complete``, ``incomplete``, ``missing``
        or ``not-ddr``), ``reason`` (``missing`` at a URL: e.g. the bucket does not
        exist), ``kind`` (the output kind, unless ``missing`` or ``not-ddr``) and
        what the kind shows: arrays, fingerprint, provenance, claim, ...; ``error`` when
        the output could not be read.

    Raises
    ------
    OSError, ValueError
        The path cannot be reached or is not a valid location.
    """
    from ddr.pipeline.outputs import kind_at

    p = resolve(path)
    info: dict[str, Any] = {"path": p.url if isinstance(path, Location) else redact(str(path))}
    if not p.exists() or p.is_empty_folder():  # an empty folder is nobody's output
        info["status"] = "missing"
        if p.bucket is not None:  # why, as a run says it: the bucket does not exist, ...
            from ddr.io.inputs import missing_message

            why = missing_message(p, info["path"], "output")
            if why == p.missing_bucket():
                info["reason"] = why.removeprefix(f"{p.url}: ")
        return info
    kind, probe = kind_at(p)
    if kind is None:  # a file no kind wrote (any folder or store is the zarr kind's to read)
        info.update(status="not-ddr", fingerprint=None, bytes=p.size())
        return info
    info.update(kind.inspect(probe))
    if info["status"] != "not-ddr":  # a store ddr did not write is of no kind
        info["kind"] = kind.name
    return info
