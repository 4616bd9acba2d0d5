"""The contract every mergeable statistic follows, and the spec that configures one.

A statistic is a small immutable value with three operations: ``from_block`` (the statistic
of one in-memory block of rows), ``merge`` (associative and commutative, so blocks may be
combined in any tree) and read-outs. ``to_dict``/``from_dict`` give a representation made
of numpy arrays and JSON scalars only, so statistics can be stored without pickle.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Self

import numpy as np

__all__ = ["StatSpec", "Statistic", "merge_all", "statistic_from_dict"]

_REGISTRY: dict[str, type[Statistic]] = {}


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
    """

    needs_labels: ClassVar[bool] = False
    accepts_labels: ClassVar[bool] = False
    accepts_sparse: ClassVar[bool] = False
    carries_rows: ClassVar[bool] = False
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    readouts: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

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

    @abc.abstractmethod
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
        """

    @abc.abstractmethod
    def _arrays(self) -> dict[str, np.ndarray]:
        """The array fields, by name."""

    @abc.abstractmethod
    def _scalars(self) -> dict[str, Any]:
        """The JSON-serialisable fields, by name."""

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
        return cls(**fields)


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
    it = iter(stats)
    try:
        acc = next(it)
    except StopIteration:
        raise ValueError("merge_all: no statistics to merge") from None
    for s in it:
        acc = acc.merge(s)
    return acc


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
