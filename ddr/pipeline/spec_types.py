"""The parts of pipeline files that do not depend on the registered output kinds.

The value types (names, references, chunk sizes, storage options), shared by the schema
(:mod:`ddr.pipeline.schema`) and the output kinds (:mod:`ddr.pipeline.outputs`), which declare
their own spec models with them; the input, step and run entries; and the file without its
outputs (:class:`PipelineSpec`), which the plan (:mod:`ddr.pipeline.plan`) keeps. Kept apart
from the schema so that the schema can list the registered kinds, and the kinds can use the
plan, without an import loop.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)

from ddr.config.validation import Duration, Int, PathStr, check_duration, not_a_bool

__all__ = [
    "ChunkSize",
    "HashFolds",
    "IfExists",
    "InputSpec",
    "Name",
    "PipelineSpec",
    "Ref",
    "RunOptions",
    "SearchSpec",
    "StepSpec",
    "StorageOptions",
    "Strict",
    "split_ref",
]

#: what to do with an existing output
IfExists = Literal["error", "overwrite", "skip-if-complete"]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ATTR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '_' and '-', starting with a "
            "letter or '_' (dots separate a step from one of its outputs)"
        )
    return value


def _check_ref(value: str) -> str:
    head, dot, tail = value.partition(".")
    if not _NAME_RE.fullmatch(head) or (dot and not _ATTR_RE.fullmatch(tail)):
        raise ValueError(
            f"{value!r} is not a valid reference: write an input or step name (e.g. X, pca) or "
            "step.output (e.g. pca.model, pca.components_)"
        )
    return value


def check_slice(value: str) -> str:
    """Refuse what is not ``'start:stop'``."""
    if not re.fullmatch(r"\s*-?\d*\s*:\s*-?\d*\s*", value):
        raise ValueError(f"{value!r} is not a slice: write 'start:stop' (e.g. '0:25', '10:')")
    return value


def _check_chunk(value: int) -> int:
    from ddr.io.stored_chunks import chunk_size_problem

    problem = chunk_size_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def split_ref(ref: str) -> tuple[str, str | None]:
    """``"pca.components_"`` -> ``("pca", "components_")``; ``"X"`` -> ``("X", None)``."""
    head, _, tail = ref.partition(".")
    return head, tail or None


#: An input, step or variable name.
Name = Annotated[str, AfterValidator(_check_name)]
#: A reference to an input or a step, or to one output of a step (``pca.model``).
Ref = Annotated[
    str,
    AfterValidator(_check_ref),
    Field(description="An input or step name, or step.output (e.g. pca.model)."),
]

#: A chunk size along one dim: elements per chunk, or -1 (the whole dim in one chunk).
ChunkSize = Annotated[int, BeforeValidator(not_a_bool), AfterValidator(_check_chunk)]

#: Options of a URL's filesystem.
StorageOptions = Annotated[
    dict[str, Any] | None,
    Field(
        description="Options of the URL's filesystem (fsspec: key/secret, endpoint_url, "
        "anon, token, account_name, ...). Credentials and endpoints otherwise come from the "
        "environment and the usual config files. Secret values are never recorded."
    ),
]


class Strict(BaseModel):
    """A part of a pipeline file: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False, frozen=True)


def _check_wait(value: bool | str | float) -> bool | str | float:
    if isinstance(value, bool):
        return value
    try:
        return check_duration(value)
    except ValueError:
        raise ValueError(f"expected true, false or a time such as 30m; got {value!r}") from None


class InputSpec(Strict):
    """An input array: a Zarr array, an array in a Zarr group or xarray Dataset, or a netCDF
    variable. Opened lazily; only metadata is read before the run."""

    path: PathStr = Field(
        description="Zarr store (a local path relative to the working dir, or a URL: s3://, "
        "gs://, az://, http(s)://, file://) or a local netCDF file."
    )
    storage_options: StorageOptions = None
    array: str | None = Field(
        None, description="The array (or variable) inside a Zarr group or netCDF file."
    )
    dims: list[Name] | None = Field(
        None, description="The dims the array must have, in order (checked before the run)."
    )
    sample_dim: Name | None = Field(
        None, description="The dim that indexes samples (default: the first dim)."
    )
    sample_dims: Name | list[Name] | None = Field(
        None,
        description="Read an array of any number of dims as a grid: these dims (a name or a "
        "list) are the samples, every other dim a feature dim (e.g. [time] of time x lat x "
        "lon); features NaN at every sample (a mask) are left out and come back as NaN in "
        "the maps the model's attributes are written as. Not together with sample_dim.",
    )
    chunks: dict[str, ChunkSize] | None = Field(
        None, description="Rechunk by dim name, e.g. {sample: 200000}; -1 means one chunk."
    )
    isel: dict[str, Annotated[str, AfterValidator(check_slice)] | list[Int]] | None = Field(
        None,
        description="Select by position along dims (xarray isel): 'start:stop' or a list of "
        "indices, e.g. {feature: '0:25'}. Metadata only: nothing is read.",
    )
    missing_chunks: Literal["error", "fill"] = Field(
        "error",
        description="A Zarr array with chunks that are not stored: refused (error), or read "
        "as the fill value (fill, for arrays sparse on purpose). Checked from one listing of "
        "the store, before any data is read.",
    )
    description: str = ""

    def grid_sample_dims(self) -> tuple[str, ...] | None:
        """``sample_dims`` as a tuple (None: the input is read as 2-D rows)."""
        if self.sample_dims is None:
            return None
        return (self.sample_dims,) if isinstance(self.sample_dims, str) else tuple(self.sample_dims)

    def selection(self) -> dict[str, slice | list[int]]:
        """``isel`` as xarray indexers."""
        out: dict[str, slice | list[int]] = {}
        for dim, sel in (self.isel or {}).items():
            if isinstance(sel, str):
                start, _, stop = sel.partition(":")
                out[dim] = slice(
                    int(start) if start.strip() else None, int(stop) if stop.strip() else None
                )
            else:
                out[dim] = list(sel)
        return out


def _check_scoring(value: str | None) -> str | None:
    # the scorings a search computes lazily are ddr.model_selection's, named once there
    from ddr.model_selection import SCORINGS

    if value is not None and value not in SCORINGS:
        raise ValueError(
            f"scoring must be one of {sorted(SCORINGS)} (or left out: the estimator's own "
            f"score); got {value!r}"
        )
    return value


def _check_folds(value: int) -> int:
    if value < 2:
        raise ValueError(f"a search needs at least 2 folds; got {value}")
    return value


def _listed(value: Any) -> str:
    # one grid or a list of grids, told apart by form, so that an error is said of one
    return "grids" if isinstance(value, list) else "grid"


def _hashed(value: Any) -> str:
    return "hashed" if isinstance(value, dict) or hasattr(value, "hash_folds") else "folds"


#: A number of folds (at least 2).
Folds = Annotated[int, BeforeValidator(not_a_bool), AfterValidator(_check_folds)]


class HashFolds(Strict):
    """Shuffled folds by a hash of each row's position (``ddr.model_selection.HashKFold``):
    the same folds for every chunking of the rows."""

    hash_folds: Folds = Field(description="Number of folds (at least 2).")
    seed: Annotated[int, BeforeValidator(not_a_bool), Field(ge=0)] = Field(
        0, description="A non-negative int: each seed gives another split."
    )


#: One grid: parameter -> the values to try (at least one).
Grid = dict[Name, Annotated[list[Any], Field(min_length=1)]]


class SearchSpec(Strict):
    """A grid search of a fit step (``ddr.model_selection.GridSearchCV``): two passes over
    its data whatever the folds and candidates; the step's model is the best candidate,
    refitted from the merge of every fold's statistics."""

    param_grid: Annotated[
        Annotated[Grid, Tag("grid")] | Annotated[list[Grid], Tag("grids"), Field(min_length=1)],
        Discriminator(_listed),
    ] = Field(
        description="Parameter -> values to try (scikit-learn's param_grid), or a list of "
        "such grids; the parameters are the estimator's, checked as `with:` is."
    )
    cv: Annotated[
        Annotated[Folds, Tag("folds")] | Annotated[HashFolds, Tag("hashed")],
        Discriminator(_hashed),
    ] = Field(
        5,
        description="An int: that many contiguous folds (scikit-learn's KFold); "
        "{hash_folds: K, seed: S}: shuffled folds by a hash of each row's position.",
    )
    scoring: Annotated[str | None, AfterValidator(_check_scoring)] = Field(
        None,
        description="accuracy, neg_log_loss or mean_log_likelihood; left out: the "
        "estimator's own score (accuracy for classifiers, the mean log-likelihood for PCA "
        "and the densities).",
    )


class StepSpec(Strict):
    """One step: an op from the registry, its inputs by name and its parameters."""

    op: str = Field(description="An op: Estimator.fit, Estimator.fit_transform, transform, ...")
    inputs: dict[Name, Ref] = Field(
        default_factory=dict,
        description="Role -> input or step name, e.g. {X: X, y: y} or {model: pca, X: X}.",
    )
    with_: dict[Name, Any] = Field(
        default_factory=dict,
        alias="with",
        description="Parameters of the op (the estimator's constructor parameters for fits).",
    )
    search: SearchSpec | None = Field(
        None,
        description="A fit step only: search this grid of the estimator's parameters by "
        "cross-validation (two passes over the data); the step's model is the best one.",
    )
    description: str = ""


class RunOptions(Strict):
    """How the pipeline runs."""

    if_exists: IfExists = Field(
        "error",
        description="An existing output: error, overwrite, or skip-if-complete (resume).",
    )
    summary: PathStr | None = Field(None, description="Write the run summary JSON here.")
    performance_report: PathStr | None = Field(
        None, description="Write a dask performance report (HTML) here (distributed only)."
    )
    progress: bool = Field(True, description="Show a progress bar.")
    state: PathStr | Literal[False] | None = Field(
        None,
        description="The run's state: a Zarr group, written last, that records what the run "
        "read of each input (one listing of its stored chunks) and the statistics of its "
        "one-pass fits, for `ddr run --update` (default: <name>.state.zarr beside the first "
        "output); false records nothing.",
    )
    storage_options: StorageOptions = None
    wait: Annotated[bool | str | float, AfterValidator(_check_wait)] = Field(
        False,
        description="An output another run is writing: false refuses, naming that run; true "
        "waits until that run ends (or its claim goes stale); a time such as 30m waits at "
        "most that long (ddr run --wait: true).",
    )
    claim_timeout: Duration = Field(
        "2m",
        description="A run's claim on its outputs goes stale, and another run may take it "
        "over, when its heartbeat (renewed every quarter of this) is older than this.",
    )


class PipelineSpec(Strict):
    """A pipeline file as the plan keeps it: every part but the outputs, each the spec of its
    kind (:class:`ddr.pipeline.schema.Pipeline` validates them against the registered kinds)."""

    ddr: Literal[1] = Field(description="Schema version of this file (1).")
    name: Name
    description: str = ""
    params: dict[Name, Any] = Field(
        default_factory=dict,
        description="Values used as ${params.NAME} anywhere; override with --set NAME=VALUE.",
    )
    inputs: dict[Name, InputSpec] = Field(min_length=1)
    steps: dict[Name, StepSpec] = Field(default_factory=dict)
    outputs: list[Any] = Field(min_length=1)
    run: RunOptions = Field(default_factory=RunOptions)
