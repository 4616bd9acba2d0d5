"""A zarr store that writes only while its run's claim on the output holds.

:class:`ClaimedStore` wraps the store an output is written through (by the driver and, pickled
with the dask graph, by every worker): each write is made inside the claim's fence
(:meth:`ddr.io.claims.ClaimRef.fence`), so once another run has taken the output over, the
writes of this one stop with :class:`~ddr.io.claims.ClaimLost` instead of landing among the
other run's chunks.

The document that marks an output complete is also guarded on object stores, where no lock
holds a writer back: the driver reads the group's ``zarr.json`` with its ETag, checks that it
carries its own claim token (:data:`~ddr.io.claims.CLAIM_ATTR`), and :meth:`ClaimedStore.expect`
makes the writes of that document conditional on that ETag (``If-Match``): a run whose output
was rewritten by another meanwhile cannot mark it complete.
"""

from __future__ import annotations

import json
from typing import Any

from zarr.storage import WrapperStore

from ddr.io.claims import ClaimLost, ClaimRef
from ddr.io.locations import Location

__all__ = ["ClaimedStore", "metadata_version"]


class ClaimedStore(WrapperStore):
    """``store`` (a zarr store of one output) whose writes need the claim ``ref``."""

    def __init__(self, store: Any, ref: ClaimRef) -> None:
        super().__init__(store)
        self.ref = ref
        self._expected: dict[str, str] = {}

    def _with_store(self, store: Any) -> ClaimedStore:
        return type(self)(store, self.ref)

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self._store, "ref": self.ref}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store"], state["ref"])  # type: ignore[misc]

    def expect(self, key: str, etag: str) -> None:
        """Write ``key`` only over the object version ``etag`` from now on (each write then
        expects the version it made)."""
        self._expected[key] = etag

    async def set(self, key: str, value: Any) -> None:
        with self.ref.fence():
            if key in self._expected:
                await self._conditional_put(key, value)
            else:
                await self._store.set(key, value)

    async def set_if_not_exists(self, key: str, value: Any) -> None:
        with self.ref.fence():
            await self._store.set_if_not_exists(key, value)

    async def delete(self, key: str) -> None:
        with self.ref.fence():
            await self._store.delete(key)

    async def delete_dir(self, prefix: str) -> None:
        with self.ref.fence():
            await self._store.delete_dir(prefix)

    async def _conditional_put(self, key: str, value: Any) -> None:
        fs, root = self._store.fs, self._store.path
        path = f"{root.rstrip('/')}/{key}"
        try:
            out = await fs._pipe_file(path, value.to_bytes(), IfMatch=self._expected[key])
        except OSError as exc:
            from ddr.io.claim_files import refused

            if not refused(exc):
                raise
            raise ClaimLost(
                f"{path} was rewritten by another run while this run finished the output; "
                "this run does not mark it complete"
            ) from None
        if isinstance(out, dict) and "ETag" in out:
            self._expected[key] = str(out["ETag"])
        else:  # pragma: no cover - s3fs returns the PUT's response
            self._expected.pop(key)


def metadata_version(output: Location) -> tuple[dict[str, Any], str | None]:
    """The group attributes of ``output`` and the version of its ``zarr.json`` (an S3
    object's ETag; None elsewhere)."""
    doc = output.joinpath("zarr.json")
    if output.protocol != "s3":
        data = json.loads(doc.read_bytes())
        return dict(data.get("attributes") or {}), None
    with doc.errors("read"), doc.fs.open(doc.fs_path, "rb") as f:
        etag = str(f.details.get("ETag", ""))
        data = json.loads(f.read())
    return dict(data.get("attributes") or {}), etag or None
