"""Output kinds that are one file (JSON, PNG, ...), written whole or not at all.

A file is rendered in memory, fingerprint and provenance inside, and written in one go
(:meth:`ddr.io.locations.Location.write_bytes`: locally to a temporary name renamed into
place, on an object store in one PUT), so a crash never leaves a half-written file; a file
whose fingerprint can be read back is complete. Such a file is rewritten whole on every
write, so ``--force`` may replace one that ddr did not write.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from ddr.io.outputs import fenced
from ddr.pipeline.outputs.base import OutputKind, Probe, WriteContext

if TYPE_CHECKING:
    from ddr.io.locations import Location
    from ddr.pipeline.plan import OutputPlan

__all__ = ["FileKind", "read_file"]


def read_file(location: Location) -> bytes | None:
    """The bytes at ``location``; None when they cannot be read as a file (a folder, a
    store gone); access errors and timeouts are raised."""
    try:
        return location.read_bytes()
    except (PermissionError, TimeoutError, ConnectionError):
        raise
    except Exception:  # unreadable: not a (complete) ddr file
        return None


class FileKind(OutputKind):
    """An output that is one file. Subclasses say how to render it and how to read the
    fingerprint and provenance back from its bytes."""

    replaces_foreign = True

    @abc.abstractmethod
    def render(self, w: WriteContext, out: OutputPlan) -> bytes:
        """The file's bytes, with ``out.fingerprint`` and the provenance inside."""

    @abc.abstractmethod
    def fingerprint_in(self, content: bytes) -> str | None:
        """The fingerprint stored in the bytes of a file (may raise on foreign bytes)."""

    @abc.abstractmethod
    def provenance_in(self, content: bytes) -> dict[str, Any] | None:
        """The provenance stored in the bytes of a file (may raise on foreign bytes)."""

    def contents(self, content: bytes) -> dict[str, Any]:
        """What ``ddr inspect`` shows of a complete file besides its size (nothing)."""
        return {}

    # ----------------------------------------------------------------------------
    def fingerprint(self, content: bytes | None) -> str | None:
        """The fingerprint in ``content``; None for bytes this kind did not write."""
        if content is None:
            return None
        try:
            value = self.fingerprint_in(content)
        except Exception:  # not this kind's format: not a (complete) ddr file
            return None
        return value if isinstance(value, str) else None

    def write(self, w: WriteContext, out: OutputPlan) -> None:
        self.write_file(w, out, self.render(w, out))

    def write_file(self, w: WriteContext, out: OutputPlan, data: bytes) -> None:
        """Write ``data`` at the output's location under the run's claim; refuse to replace
        a file the plan did not decide to overwrite (it appeared since)."""
        with fenced(w.claim(out)):
            if out.action != "overwrite" and out.location.exists():
                raise FileExistsError(
                    f"{out.location.shown!r} appeared while the pipeline ran; not replacing it"
                )
            out.location.write_bytes(data)

    def status(self, location: Location) -> tuple[str, str | None]:
        if not location.exists() or location.is_empty_folder():
            return "missing", None
        stored = self.fingerprint(read_file(location))
        return ("complete", stored) if stored is not None else ("not-ddr", None)

    def read_provenance(self, location: Location) -> dict[str, Any] | None:
        try:
            content = location.read_bytes()
            value = self.provenance_in(content)
        except Exception:  # unreadable: nothing to compare with
            return None
        return value if isinstance(value, dict) else None

    def recognizes(self, probe: Probe) -> int:
        return 2 if self.fingerprint(probe.content) is not None else 0

    def inspect(self, probe: Probe) -> dict[str, Any]:
        fp = self.fingerprint(probe.content)
        info: dict[str, Any] = {
            "status": "complete" if fp else "not-ddr",
            "fingerprint": fp,
            "bytes": probe.location.size(),
        }
        if fp and probe.content is not None:
            info.update(self.contents(probe.content))
        return info
