"""The contract every mergeable statistic follows, and the spec that configures one.

A statistic is a small immutable value with three operations: ``from_block`` (the statistic
of one in-memory block of rows), ``merge`` (associative and commutative, so blocks may be
combined in any tree) and read-outs. ``to_dict``/``from_dict`` give a representation made
of numpy arrays and JSON scalars only, so statistics can be stored without pickle.

What every statistic repeated is done here, from declarations: the coercion of its fields
(``_fields_as``: float64 arrays, counts, labels, ...) when a value is built, and the guards
of ``merge`` (same kind, same shape, labelled with labelled) before the statistic's own
:meth:`Statistic._merge` runs. Each statistic declares the dims of its read-outs
(``readout_dims``), which is what a pipeline's Zarr output of it is labelled with.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np

__all__ = [
    "FEATURE_DIM",
    "CheckData",
    "StatSpec",
    "Statistic",
    "merge_all",
    "statistic_from_dict",
]

_REGISTRY: dict[str, type[Statistic]] = {}

#: In ``readout_dims``: the feature dim of the data the statistic was computed from
#: (``"{feature}_2"`` is its second copy, e.g. the columns of a covariance).
FEATURE_DIM = "{feature}"


def _in_ddr(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "ddr"


def _labels(value: Any) -> Any:
    return None if value is None else np.asarray(value)


def _count(value: Any) -> Any:
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)


#: the kinds of ``_fields_as`` that ``to_dict`` stores as arrays (the others as JSON scalars)
_ARRAY_KINDS = ("float64", "int64", "count", "labels")

#: how a field is stored, by the kind ``_fields_as`` names
_COERCE = {
    "float64": lambda v: np.asarray(v, dtype=np.float64),
    "int64": lambda v: np.asarray(v, dtype=np.int64),
    "float": float,
    "int": int,
    "count": _count,
    "labels": _labels,
    "tuple": tuple,
}


@dataclasses.dataclass(frozen=True)
class CheckData:
    """Rows of the kind a statistic takes, for the conformance suite of :mod:`ddr.testing`.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        The rows.
    y : ndarray of shape (n_rows,) or None
        Class labels, where the statistic uses them.
    options : dict
        Options of ``from_block`` (a basis, topics, model parameters).
    invariant : tuple of str
        Read-outs (or fields) that do not change when the rows move by a constant vector
        (covariances, counts): checked on data at a 1e8 offset.
    offset : bool
        Whether the rows may be moved at all (not category codes or counts).
    """

    X: np.ndarray
    y: np.ndarray | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    invariant: tuple[str, ...] = ()
    offset: bool = True


class Statistic(abc.ABC):
    """Base class of the mergeable statistics in :mod:`ddr.stats`.

    Subclasses are frozen dataclasses. ``needs_labels`` says whether ``from_block`` requires
    class labels ``y``; ``accepts_labels`` whether it uses them when given;
    ``_parameter_constraints`` declares the options of ``from_block`` (scikit-learn's
    constraint objects, as estimators declare their parameters; checked by :meth:`spec`);
    ``readouts`` names what a pipeline reference ``step.NAME`` may read (attributes or
    zero-argument methods); ``accepts_sparse`` whether ``from_block`` takes scipy.sparse CSR
    blocks (the engine refuses sparse input for statistics that do not); ``carries_rows``
    whether it also has ``from_block_with_rows(X, rows, **options) -> (stat, new_rows)``,
    a step that reads and updates per-row parameters kept between passes
    (:func:`ddr.stats.compute_with_rows`).

    ``readout_dims`` gives each read-out's dims (:data:`FEATURE_DIM` for the data's feature
    dim); a read-out without them is refused when the class is defined. ``readout_units``
    the power of the data's units each is in (1: a mean, 2: a variance, 0: a count or a
    correlation; as an estimator's ``xarray_units``): a pipeline's Zarr output states them as
    ``units`` when its input has units; a read-out not listed gets none. ``_fields_as``
    says how each field is stored (``"float64"``, ``"int64"``, ``"float"``, ``"int"``,
    ``"count"``: a float or a float64 array, ``"labels"``: an array or None, ``"tuple"``);
    ``_validate`` checks fields against each other after that. :meth:`merge` refuses
    another kind of statistic, another ``_merge_key`` (the number of features unless
    the statistic says otherwise; the message is ``_merge_mismatch``) and, where
    ``_labels_field`` names a field that may be None, labelled with unlabelled values;
    then the statistic's ``_merge`` combines them. ``check_invariant`` names the read-outs
    an offset of the rows must not move, and :meth:`check_data` the rows it takes, for the
    conformance suite of :mod:`ddr.testing`.
    """

    needs_labels: ClassVar[bool] = False
    accepts_labels: ClassVar[bool] = False
    accepts_sparse: ClassVar[bool] = False
    carries_rows: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    readouts: ClassVar[tuple[str, ...]] = ()
    readout_dims: ClassVar[dict[str, tuple[str, ...]]] = {}
    readout_units: ClassVar[dict[str, int | None]] = {}
    # read-outs (or fields) that do not change when the rows move by a constant vector
    # (covariances, counts): the conformance suite checks them on data at a 1e8 offset
    check_invariant: ClassVar[tuple[str, ...]] = ()
    _fields_as: ClassVar[dict[str, str]] = {}
    _merge_mismatch: ClassVar[str] = "cannot merge {cls} of {a} features with {cls} of {b} features"
    _labels_field: ClassVar[str | None] = None
    _labels_mismatch: ClassVar[str] = "cannot merge labelled {cls} with unlabelled ones"
    #: the class whose :meth:`_merge` a value uses (what it merges with)
    _merges_with: ClassVar[type[Statistic]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "merge" in cls.__dict__ and "_merge" not in cls.__dict__:
            # a statistic that writes merge itself (the contract before the base did the
            # guards) keeps it, with its own checks
            cls._merge = cls.__dict__["merge"]  # type: ignore[method-assign]
        if "_merge" in cls.__dict__:
            cls._merges_with = cls
        problems = []
        unknown = sorted(set(cls._fields_as.values()) - set(_COERCE))
        if unknown:
            problems.append(f"_fields_as kinds {unknown} are not among {sorted(_COERCE)}")
        undeclared = [r for r in cls.readouts if r not in cls.readout_dims]
        if undeclared:
            problems.append(f"read-outs {undeclared} have no readout_dims entry")
        if problems:
            raise TypeError(f"{cls.__module__}.{cls.__name__}: {'; '.join(problems)}")
        have = _REGISTRY.get(cls.__name__)
        if have is None or not _in_ddr(have) or _in_ddr(cls):
            # a class of another package never takes the type name of one of ddr's (a
            # plug-in statistic named so is refused when it is registered, ddr.plugins)
            _REGISTRY[cls.__name__] = cls

    def __post_init__(self) -> None:
        for name, kind in self._fields_as.items():
            object.__setattr__(self, name, _COERCE[kind](getattr(self, name)))
        self._validate()

    def _validate(self) -> None:  # noqa: B027 (a hook that may stay empty)
        """Checks between fields, after their coercion (none here); raise ValueError."""

    @classmethod
    @abc.abstractmethod
    def from_block(
        cls,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        **options: Any,
    ) -> Self:
        """The statistic of one in-memory block of rows.

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
            The block.
        y : ndarray of shape (n_rows,), optional
            Class labels of its rows (required where ``needs_labels``).
        sample_weight : ndarray of shape (n_rows,), optional
            Non-negative weights of its rows.
        **options
            The statistic's options (declared in ``_parameter_constraints``).

        Returns
        -------
        Statistic
            The statistic of these rows alone.
        """

    def merge(self, other: Self) -> Self:
        """Combine with the statistic of disjoint rows (associative and commutative).

        Parameters
        ----------
        other : Statistic
            The same statistic, with the same options, of other rows.

        Returns
        -------
        Statistic
            The statistic of the rows of both.

        Raises
        ------
        TypeError
            If ``other`` is another kind of statistic.
        ValueError
            If ``other`` has another shape (features, basis, bins), or is labelled where
            this one is not.
        """
        self._check_mergeable(other)
        return self._merge(other)

    def merge_many(self, others: Sequence[Self]) -> Self:
        """Combine with the statistics of several disjoint sets of rows at once.

        The same as merging ``others`` one after another (to round-off), with the guards
        of :meth:`merge`; a statistic may do it in one step (the d x d sums of
        :class:`~ddr.stats.Moments` are added into one new matrix, not one per merge).

        Parameters
        ----------
        others : sequence of Statistic
            The same statistic, with the same options, of other rows.

        Returns
        -------
        Statistic
            The statistic of the rows of all.
        """
        for other in others:
            self._check_mergeable(other)
        return self._merge_many(list(others)) if others else self

    def _check_mergeable(self, other: Statistic) -> None:
        kind = self._merges_with
        if not isinstance(other, kind):
            raise TypeError(f"cannot merge {kind.__name__} with {type(other).__name__}")
        a, b = self._merge_key(), other._merge_key()
        if a is not None and b is not None and a != b:
            raise ValueError(self._merge_mismatch.format(cls=kind.__name__, a=a, b=b))
        field = self._labels_field
        if field is not None and (getattr(self, field) is None) != (getattr(other, field) is None):
            raise ValueError(self._labels_mismatch.format(cls=kind.__name__))

    @abc.abstractmethod
    def _merge(self, other: Self) -> Self:
        """:meth:`merge` once the guards passed: the statistic of the rows of both."""

    def _merge_many(self, others: list[Self]) -> Self:
        """:meth:`merge_many` once the guards passed (at least one other); by default one
        :meth:`_merge` after another."""
        acc = self
        for other in others:
            acc = acc._merge(other)
        return acc

    def _merge_key(self) -> Any:
        """What two values must share to merge (None: not known, not checked); by default
        the number of features."""
        return getattr(self, "n_features", None)

    @classmethod
    def dims_of(cls, readout: str, ndim: int, feature_dim: str) -> tuple[str, ...]:
        """The dims of a read-out's value, for labelled output (a pipeline's Zarr).

        Parameters
        ----------
        readout : str
            A name of ``readouts`` (or of ``to_dict``'s fields).
        ndim : int
            The number of dims of its value.
        feature_dim : str
            The feature dim of the data the statistic was computed from.

        Returns
        -------
        tuple of str
            As declared in ``readout_dims``, or ``readout_dim_0, ...`` where nothing is
            declared or the value has another number of dims than declared (a diagonal
            form's per-feature count where the full form has one).
        """
        declared = cls.readout_dims.get(readout)
        if declared is None or len(declared) != ndim:
            return tuple(f"{readout}_dim_{i}" for i in range(ndim))
        return tuple(d.format(feature=feature_dim) for d in declared)

    def _arrays(self) -> dict[str, np.ndarray]:
        """The array fields, by name: those ``_fields_as`` stores as arrays (labels that are
        None left out)."""
        out = {}
        for name, kind in self._fields_as.items():
            if kind in _ARRAY_KINDS and (kind != "labels" or getattr(self, name) is not None):
                out[name] = np.asarray(getattr(self, name))
        return out

    def _scalars(self) -> dict[str, Any]:
        """The JSON-serialisable fields, by name: those ``_fields_as`` stores as scalars."""
        return {n: getattr(self, n) for n, k in self._fields_as.items() if k in ("float", "int")}

    @classmethod
    def check_data(cls, rng: np.random.Generator, n_rows: int) -> CheckData:
        """Rows (labels, options) of the kind this statistic takes, for :mod:`ddr.testing`.

        The default: three correlated normal features, three classes where the statistic
        uses labels, no options, ``check_invariant`` for what must not move with an
        offset. Statistics with required options, or that take codes or counts, override
        it.

        Parameters
        ----------
        rng : numpy.random.Generator
            The source of the rows.
        n_rows : int
            How many.

        Returns
        -------
        CheckData
        """
        X = rng.standard_normal((n_rows, 3)) @ np.array([[2.0, 0.3, 0.0], [0, 1, 0.5], [0, 0, 0.7]])
        y = np.arange(n_rows) % 3 if cls.accepts_labels or cls.needs_labels else None
        return CheckData(X, y, invariant=cls.check_invariant)

    # ------------------------------------------------------ memory estimates
    @classmethod
    def value_nbytes(cls, n_features: int, n_classes: int = 1, **options: Any) -> int:
        """Bytes of one value of the statistic (a block's or a merge's).

        For memory estimates made before a pass (a merge task holds ``split_every`` of them).
        The default is what most statistics hold: a d x d float64 scatter and two float64
        d-vectors per class. Statistics that hold less or more override it.

        Parameters
        ----------
        n_features : int
            Width d of the data.
        n_classes : int, default 1
            Number of classes, for statistics kept per class.
        **options
            The statistic's options (as given to :meth:`spec`).

        Returns
        -------
        int
            Bytes.
        """
        return 8 * n_classes * (n_features * n_features + 2 * n_features)

    @classmethod
    def block_nbytes(cls, n_rows: int, n_features: int, n_classes: int = 1, **options: Any) -> int:
        """Bytes :meth:`from_block` allocates besides its input block and its value.

        For memory estimates: by default the float64 buffer of centred rows that the
        statistics share (``ddr.stats._centring``), about 1 MiB: 2**17 / d rows, at least
        1024 and at most 8192.

        Parameters
        ----------
        n_rows : int
            Rows of the block.
        n_features : int
            Width d of the data.
        n_classes : int, default 1
            Number of classes, for statistics kept per class.
        **options
            The statistic's options (as given to :meth:`spec`).

        Returns
        -------
        int
            Bytes.
        """
        rows = min(n_rows, int(np.clip(2**17 // max(n_features, 1), 1024, 8192)))
        return 8 * rows * n_features

    @classmethod
    def spec(cls, **options: Any) -> StatSpec:
        """A configured statistic for :func:`~ddr.stats.compute`.

        E.g. ``Moments.spec(diagonal=True)``. Options declared in ``_parameter_constraints``
        are checked here (an ``InvalidParameterError`` naming the option).

        Parameters
        ----------
        **options
            Options of :meth:`from_block`.

        Returns
        -------
        StatSpec
            The class with its options.
        """
        if cls._parameter_constraints:
            from ddr._params import validate_parameters

            validate_parameters(cls._parameter_constraints, options, f"{cls.__name__}.spec")
        return StatSpec(cls, tuple(sorted(options.items())))

    def to_dict(self) -> dict[str, Any]:
        """A dict of numpy arrays and JSON scalars; ``type`` names the statistic."""
        return {"type": type(self).__name__, **self._scalars(), **self._arrays()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a statistic from :meth:`to_dict` output.

        Parameters
        ----------
        data : mapping
            What :meth:`to_dict` returned (its ``type`` must name this class).

        Returns
        -------
        Statistic
            The statistic.
        """
        data = dict(data)
        kind = data.pop("type", cls.__name__)
        if kind != cls.__name__:
            raise ValueError(f"from_dict: expected a {cls.__name__} dict, got type={kind!r}")
        return cls._from_fields(data)

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(fields) - names
        if unknown:
            raise ValueError(f"from_dict: unknown fields {sorted(unknown)} for {cls.__name__}")
        labels = {n: None for n, kind in cls._fields_as.items() if kind == "labels"}
        return cls(**{**labels, **fields})  # labels that were None are not stored


@dataclasses.dataclass(frozen=True)
class StatSpec:
    """A statistic class together with its ``from_block`` options.

    Built with ``Statistic.spec(**options)``; hashable and tokenisable so dask graphs that
    use it are deterministic.

    Parameters
    ----------
    options : tuple of (str, object) pairs
        The options, sorted by name (the first field, ``cls``, is the statistic's class).
    """

    cls: type[Statistic]
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def needs_labels(self) -> bool:
        return self.cls.needs_labels

    @property
    def accepts_labels(self) -> bool:
        return self.cls.accepts_labels

    @property
    def accepts_sparse(self) -> bool:
        return self.cls.accepts_sparse

    def from_block(
        self,
        X: np.ndarray,
        y: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Statistic:
        return self.cls.from_block(X, y, sample_weight, **dict(self.options))

    def from_block_with_rows(self, X: Any, rows: np.ndarray | None) -> tuple[Statistic, Any]:
        return self.cls.from_block_with_rows(X, rows, **dict(self.options))  # type: ignore[attr-defined]

    def value_nbytes(self, n_features: int, n_classes: int = 1) -> int:
        """:meth:`Statistic.value_nbytes` with this spec's options.

        Parameters
        ----------
        n_features : int
            Width d of the data.
        n_classes : int, default 1
            Number of classes, for statistics kept per class.

        Returns
        -------
        int
            Bytes.
        """
        return int(self.cls.value_nbytes(n_features, n_classes, **dict(self.options)))

    def block_nbytes(self, n_rows: int, n_features: int, n_classes: int = 1) -> int:
        """:meth:`Statistic.block_nbytes` with this spec's options.

        Parameters
        ----------
        n_rows : int
            Rows of the block.
        n_features : int
            Width d of the data.
        n_classes : int, default 1
            Number of classes, for statistics kept per class.

        Returns
        -------
        int
            Bytes.
        """
        return int(self.cls.block_nbytes(n_rows, n_features, n_classes, **dict(self.options)))

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options)
        return f"{self.cls.__name__}.spec({opts})"


def as_spec(stat: type[Statistic] | StatSpec) -> StatSpec:
    """Accept a bare statistic class or a spec."""
    if isinstance(stat, StatSpec):
        return stat
    if isinstance(stat, type) and issubclass(stat, Statistic):
        return StatSpec(stat)
    raise TypeError(
        "stats: expected a Statistic class (e.g. Moments) or a spec "
        f"(e.g. Moments.spec(diagonal=True)), got {stat!r}"
    )


def merge_all(stats: Iterable[Statistic]) -> Statistic:
    """Merge a non-empty sequence of statistics left to right.

    Parameters
    ----------
    stats : iterable of Statistic
        Statistics of disjoint rows, all of one kind and options.

    Returns
    -------
    Statistic
        The statistic of all their rows.
    """
    parts = list(stats)
    if not parts:
        raise ValueError("merge_all: no statistics to merge")
    return parts[0].merge_many(parts[1:])


def statistic_from_dict(data: Mapping[str, Any]) -> Statistic:
    """Rebuild any statistic from :meth:`Statistic.to_dict` output, dispatching on ``type``.

    Parameters
    ----------
    data : mapping
        What :meth:`Statistic.to_dict` returned.

    Returns
    -------
    Statistic
        A statistic of the class ``data["type"]`` names.
    """
    kind = data.get("type")
    if kind not in _REGISTRY:
        raise ValueError(
            f"statistic_from_dict: unknown type {kind!r}; valid types are {sorted(_REGISTRY)}"
        )
    return _REGISTRY[kind].from_dict(data)
