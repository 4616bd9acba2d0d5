"""The planner's checks of outputs, and what to do with each existing one.

Mixed into the planner: each output's references must exist, its kind checks what they
hold (:meth:`ddr.pipeline.outputs.OutputKind.check`), paths must not touch an input or
another output, and an existing output is kept, rewritten or refused according to
``if_exists``, its status and its fingerprint (read by its kind).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ddr.io.claims import claim_location
from ddr.io.locations import Location, LocationError, resolve
from ddr.pipeline.lineage import describe_changes, lineage
from ddr.pipeline.outputs import output_kind
from ddr.pipeline.plan import OutputPlan, StepPlan, ValueMeta, _did_you_mean
from ddr.pipeline.run_files import RunFile, refusals, run_files
from ddr.pipeline.spec_types import split_ref

__all__ = ["OutputChecks", "output_refs"]


def output_refs(spec: Any) -> dict[str, str]:
    """What an output names, as key -> reference (:meth:`ddr.pipeline.outputs.OutputKind.refs`:
    a variable or key, ``coord:NAME`` for a Zarr output's coordinates, ``labels`` and
    ``y_from`` for a plot's)."""
    return output_kind(spec.kind).refs(spec)


class OutputChecks:
    """Output checks of :class:`ddr.pipeline.planner._Planner` (uses its state)."""

    doc: Any
    inputs: dict[str, Any]
    steps: dict[str, StepPlan]
    outputs: list[OutputPlan]
    bad_steps: set[str]
    force: bool
    resume: bool

    problem: Callable[..., Any]  # provided by the concrete class

    _resolve: Callable[..., Any]  # provided by the concrete class

    def _output(self, i: int, spec: Any, default_if_exists: str) -> None:
        kind = output_kind(spec.kind)
        refs = kind.planned_refs(spec, self)
        if_exists = spec.if_exists or default_if_exists
        if self.force:
            if_exists = "overwrite"
        elif self.resume:
            if_exists = "skip-if-complete"
        try:
            location = resolve(spec.path, spec.storage_options)
            if location.read_only:
                raise LocationError(f"{location.url}: {location.protocol}:// URLs are read-only")
        except LocationError as exc:
            self.problem(("outputs", i, "path"), str(exc))
            return
        out = OutputPlan(i, spec, location, if_exists, refs)
        metas: dict[str, ValueMeta] = {}
        ok = True
        for key, ref in refs.items():
            path = ("outputs", i, *kind.ref_where(spec, key))
            head, _ = split_ref(ref)
            if head not in self.inputs and head not in self.steps and head not in self.bad_steps:
                raw_inputs = self.doc.data.get("inputs")
                if not (isinstance(raw_inputs, dict) and head in raw_inputs):
                    names = sorted(set(self.inputs) | set(self.steps) | self.bad_steps)
                    self.problem(
                        path,
                        f"{ref!r} is neither an input nor a step"
                        f"{_did_you_mean(head, names)}; inputs and steps: "
                        f"{', '.join(names)}",
                    )
                ok = False
                continue
            if head in self.bad_steps or (head in self.steps and not self.steps[head].outputs):
                ok = False
                continue
            meta = self._resolve(ref, path)
            if meta is None:
                ok = False
                continue
            metas[key] = meta
        self.outputs.append(out)
        if ok:
            kind.check(self, out, metas)
            out.streamed = kind.streams(out, metas)

    def _check_output_paths(self) -> None:
        from ddr.io.outputs import check_not_input

        seen: dict[Location, int] = {}
        inputs = [loc for _, loc in self._all_inputs()]
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            try:
                check_not_input(out.location, inputs)
            except ValueError:
                inp = next(
                    (i for i in inputs if out.location.overlaps(i)),
                    inputs[0] if inputs else out.location,
                )
                rel = (
                    "is"
                    if out.location == inp
                    else "would be inside"
                    if inp.contains(out.location)
                    else "contains"
                )
                self.problem(
                    where,
                    f"the output {out.spec.path!r}{out.location.link_note} {rel} the input "
                    f"{inp.shown!r}; outputs never overwrite inputs",
                )
                continue
            claim = claim_location(out.location)
            inp = next((i for i in inputs if claim.overlaps(i)), None)
            if inp is not None:
                self.problem(
                    where,
                    f"the claim of the output {out.spec.path!r} ({claim.shown}) would be "
                    f"inside the input {inp.shown!r}; outputs never overwrite inputs",
                )
                continue
            for other, j in seen.items():
                if out.location.overlaps(other):
                    self.problem(
                        where,
                        f"the output {out.spec.path!r} overlaps outputs[{j}] "
                        f"({other.shown}); each output needs its own path",
                    )
                    break
            seen[out.location] = out.index

    def _check_run_files(self, run_opts: Any, given: dict[str, str | None]) -> list[RunFile]:
        """Resolve the run files (summary, its log, performance report) from the pipeline and
        from ``given`` (the command line), and check each against every input and every other
        path the run writes; return them."""
        from ddr.config.errors import Location as Place
        from ddr.config.errors import Problem

        def problem(origin: str, value: str, message: str) -> None:
            if origin.startswith("run."):
                self.problem(("run", origin.removeprefix("run.")), message)
            else:  # a command-line option
                self.doc.problems.append(Problem(Place(f"{origin} {value}", 0, 0), message))

        errors: list[tuple[str, str, str]] = []
        files = run_files(run_opts, given, errors=errors)
        for origin, value, message in errors:
            problem(origin, value, message)
        from ddr.io.inputs import opened_inputs

        inputs = self._all_inputs()
        known = {loc for _, loc in inputs}
        inputs += [("opened in this process", loc) for loc in opened_inputs() if loc not in known]
        for rf, why in refusals(files, inputs, self._written_outputs()):
            problem(rf.origin, rf.value, why)
        return files

    def _written_outputs(self) -> list[tuple[str, Location]]:
        """Every path the outputs write (each output and its claim), described for
        messages."""
        out = []
        for o in self.outputs:
            out.append((f"outputs[{o.index}]", o.location))
            out.append((f"the claim of outputs[{o.index}]", claim_location(o.location)))
        return out

    def _all_inputs(self) -> list[tuple[str, Location]]:
        """Every input as (name, location), those that could not be opened included, and
        the saved models the pipeline's load steps read (``the model of step S``)."""
        found = {name: p.location for name, p in self.inputs.items()}
        raw_inputs = self.doc.data.get("inputs") if isinstance(self.doc.data, dict) else {}
        for name, spec in raw_inputs.items() if isinstance(raw_inputs, dict) else []:
            if name in found or not isinstance(spec, dict):
                continue
            if isinstance(spec.get("path"), str):
                try:
                    found[name] = resolve(spec["path"])
                except LocationError:  # reported with the input
                    continue
        for sid, step in self.steps.items():
            if sid in self.bad_steps or step.op.family != "load":
                continue
            path, options = step.spec.with_.get("path"), step.spec.with_.get("storage_options")
            if isinstance(path, str) and (options is None or isinstance(options, dict)):
                try:
                    found[f"the model step {sid} loads"] = resolve(path, options)
                except LocationError:  # reported with the step
                    continue
        return list(found.items())

    def _decide_outputs(self) -> None:
        for out in self.outputs:
            where = ("outputs", out.index, "path")
            try:
                out.location.check_writable()
                status, stored = output_kind(out.kind).status(out.location)
            except (OSError, ImportError, LocationError) as exc:
                self.problem(where, f"output {out.spec.path!r}: {exc}")
                continue
            out.status = status
            if status == "missing":
                out.action, out.reason = "write", "missing"
                continue
            if status == "not-ddr":
                if out.if_exists == "overwrite" and output_kind(out.kind).replaces_foreign:
                    out.action, out.reason = "overwrite", "not written by ddr"
                    continue
                self.problem(
                    where,
                    f"{out.spec.path!r} exists and was not written by ddr; "
                    "refusing to replace it (choose another path)",
                )
                continue
            if out.if_exists == "error":
                state = "complete" if status == "complete" else "INCOMPLETE (an interrupted run?)"
                self.problem(
                    where,
                    f"the output {out.spec.path!r} already exists ({state}); "
                    "pass --force to replace it, --resume (if_exists: skip-if-complete) "
                    "to keep complete outputs, or set if_exists",
                )
                continue
            if out.if_exists == "overwrite":
                out.action, out.reason = "overwrite", f"{status}, --force/overwrite"
            elif status == "complete" and stored == out.fingerprint:
                out.action, out.reason = "skip", "complete, same fingerprint"
            elif status == "complete":
                kind = output_kind(out.kind)
                other = kind.written_elsewhere(out.location, self.doc.data.get("name"))
                if other is not None:
                    self.problem(
                        where,
                        f"{out.spec.path!r} holds {other}, complete; this pipeline replaces "
                        "only its own outputs (choose another path, or pass --force to "
                        "replace it)",
                    )
                    continue
                out.action, out.reason = "overwrite", self._outdated(out)
            else:
                out.action, out.reason = "overwrite", "incomplete"

    def _outdated(self, out: OutputPlan) -> str:
        """Why a complete output with another fingerprint is rewritten: what changed."""
        planned = lineage(self.steps, self.inputs, list(out.refs.values()))
        stored = output_kind(out.kind).read_provenance(out.location)
        changes = describe_changes(stored, planned)
        if not changes:
            return "complete but outdated (fingerprint differs)"
        return "complete but outdated: " + "; ".join(changes)
