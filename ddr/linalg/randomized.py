"""Randomized eigendecomposition of the centred scatter of row blocks (Halko-Martinsson-Tropp).

The solver works on the *feature side*: every pass over the data applies the centred scatter
``S = A^T A``, ``A = X - 1 mu^T``, to a d x l block ``V`` through the mergeable statistic
:class:`ddr.stats.sketch.CentredProduct` (two GEMMs per row block, a Chan merge), so neither
the d x d matrix ``S`` nor the n x l sketch ``A V`` is ever formed or stored.

Passes, for ``q`` power iterations:

1. the mean, the trace and ``S Omega`` together (``Omega`` an orthonormalised Gaussian d x l
   matrix; the product is centred on block means and merged with the Chan term, so it needs
   no mean in advance);
2. ... q+1. the next block ``V``: ``S V_prev`` re-orthonormalised against the earlier blocks
   (:func:`extend_basis`: block Gram-Schmidt twice), and ``S V`` centred on the mean of
   pass 1;

then a shifted Nystrom step on the blocks ``K = [V_0 ... V_q]`` and their images ``S K``
(Tropp, Yurtsever, Udell and Cevher 2017, Algorithm 3). With the (never formed) thin QR
``A K = Q R``, the Gram statistic ``R^T R = K^T A^T A K = K^T S K`` is a by-product of the
passes and ``B = Q^T A`` satisfies ``B^T = (S K) R^{-1}``: the Nystrom step is Halko-Martinsson-
Tropp's final SVD of ``B = Q^T A``, with ``Q`` obtained by CholeskyQR of the tall-skinny
``A K`` from its mergeable Gram statistic (the small shift keeps the Cholesky factorisation
stable). HMT with ``q`` power iterations reads the data ``2q + 2`` times; here it costs
``q + 1`` passes, and keeping every block (a block Krylov space) makes it converge much
faster than plain subspace iteration for the same passes.

With ``centre=False`` the same iteration runs on the *uncentred* Gram matrix ``X^T X``
(truncated SVD, LSA) through :class:`ddr.stats.GramProduct`, which also reads scipy.sparse
row blocks without densifying them: its eigenvalues are the squared singular values of ``X``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import dask
import numpy as np
import scipy.linalg

from ddr.progress import Passes
from ddr.stats._input import Rows
from ddr.stats.engine import compute as stats_compute
from ddr.stats.engine import lazy as stats_lazy
from ddr.stats.engine import one_blas_thread
from ddr.stats.gram_product import GramProduct
from ddr.stats.sketch import CentredProduct

__all__ = [
    "RandomizedEigh",
    "extend_basis",
    "initial_basis",
    "lazy_pass",
    "nystrom_eigh",
    "orthonormalize",
    "randomized_passes",
    "randomized_scatter_eigh",
    "single_pass_eigh",
]

logger = logging.getLogger(__name__)


def orthonormalize(Z: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the columns of a tall d x l matrix (Householder QR).

    Signs are fixed (non-negative diagonal of R) so the result is deterministic; columns of a
    rank-deficient ``Z`` are completed with orthonormal directions, so the result always has
    ``l`` orthonormal columns.

    Parameters
    ----------
    Z : ndarray of shape (d, l)
        The columns, d >= l.

    Returns
    -------
    ndarray of shape (d, l)
        Orthonormal columns spanning those of ``Z``.
    """
    Q, R = scipy.linalg.qr(Z, mode="economic", check_finite=False)
    signs = np.where(np.diagonal(R) < 0, -1.0, 1.0)
    return Q * signs


def extend_basis(K: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning the part of ``Z`` orthogonal to the orthonormal ``K``.

    The next block of the Krylov iteration: block classical Gram-Schmidt with one
    re-orthogonalisation ("twice is enough", Giraud, Langou and Rozloznik 2005): project
    ``Z`` off ``K``, thin QR, project again, thin QR. O(d m l) flops in GEMMs, against
    O(d (m + l)^2) for a Householder QR of ``[K, Z]``, on which the client spent half of a
    fit at d = 20 000. The result is checked (``[K, Q]`` orthonormal to 1e-10); when it is
    not (``Z`` nearly inside ``span(K)``: the Krylov space exhausted), the Householder QR of
    ``[K, Z]`` decides, completing lost directions as :func:`orthonormalize` does.

    Parameters
    ----------
    K : ndarray of shape (d, m)
        Orthonormal columns.
    Z : ndarray of shape (d, l)
        The new columns, ``m + l <= d``.

    Returns
    -------
    ndarray of shape (d, l)
        Orthonormal columns, orthogonal to ``K``, spanning the directions of ``Z`` outside
        ``span(K)`` (nested in column order).
    """
    m, width = K.shape[1], Z.shape[1]
    Q = orthonormalize(Z - K @ (K.T @ Z))
    Q = orthonormalize(Q - K @ (K.T @ Q))
    leak = np.abs(K.T @ Q).max(initial=0.0)
    off = np.abs(Q.T @ Q - np.eye(width)).max(initial=0.0)
    if leak <= 1e-10 and off <= 1e-10:
        return Q
    logger.debug("extend_basis: Gram-Schmidt lost orthogonality (%.1e, %.1e)", leak, off)
    return orthonormalize(np.column_stack([K, Z]))[:, m : m + width]


def nystrom_eigh(V: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute the eigenpairs of the Nystrom approximation ``Z (V^T Z)^+ Z^T`` of a PSD ``S``.

    Parameters
    ----------
    V : ndarray of shape (d, l)
        Orthonormal test matrix.
    Z : ndarray of shape (d, l)
        ``S V``.

    Returns
    -------
    eigenvalues : ndarray of shape (l,)
        Non-negative, in decreasing order.
    eigenvectors : ndarray of shape (d, l)
        Orthonormal columns.

    Notes
    -----
    The stable form of Tropp et al. (2017): shift by ``nu = sqrt(d) * spacing(||Z||)``, take the
    Cholesky factor ``C`` of ``V^T (Z + nu V)``, the SVD of ``(Z + nu V) C^{-1}``, and subtract
    the shift from the squared singular values.
    """
    d = Z.shape[0]
    norm = float(np.linalg.norm(Z))
    if norm == 0.0:
        return np.zeros(V.shape[1]), V.copy()
    nu = np.sqrt(d) * np.spacing(norm)
    Zs = Z + nu * V
    T = V.T @ Zs
    T = (T + T.T) / 2
    try:
        C = scipy.linalg.cholesky(T, lower=False, check_finite=False)
        E = scipy.linalg.solve_triangular(C, Zs.T, trans="T", lower=False, check_finite=False).T
    except np.linalg.LinAlgError:
        # V^T Z numerically indefinite despite the shift (rank far below l): a pseudo-inverse
        # square root over the eigenvalues that are clearly positive does the same job.
        theta, W = scipy.linalg.eigh(T, check_finite=False)
        keep = theta > theta.max() * T.shape[0] * np.finfo(float).eps
        E = Zs @ (W[:, keep] / np.sqrt(theta[keep]))
    U, s, _ = scipy.linalg.svd(E, full_matrices=False, check_finite=False)
    lam = np.maximum(s**2 - nu, 0.0)
    if U.shape[1] < V.shape[1]:  # the pseudo-inverse branch dropped directions: complete them
        extra = orthonormalize(np.column_stack([U, V]))[:, U.shape[1] : V.shape[1]]
        U = np.column_stack([U, extra])
        lam = np.concatenate([lam, np.zeros(extra.shape[1])])
    return lam, U


@dataclasses.dataclass(frozen=True)
class RandomizedEigh:
    """Result of :func:`randomized_scatter_eigh`.

    Parameters
    ----------
    count : float
        Number of rows.
    mean : ndarray of shape (d,)
    trace : float
        Trace of the centred scatter (``sum_i ||x_i - mean||^2``), whether or not the
        iteration centred.
    eigenvalues : ndarray of shape (l,)
        Approximate top eigenvalues of the centred scatter (of ``X^T X`` when not centred),
        decreasing.
    eigenvectors : ndarray of shape (d, l)
    passes : int
        Passes made over the data.
    """

    count: float
    mean: np.ndarray
    trace: float
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    passes: int


def randomized_passes(n_features: int, n_basis: int, n_power_iter: int) -> int:
    """Count the passes :func:`randomized_scatter_eigh` makes over the data.

    ``n_power_iter + 1``, fewer when the Krylov space of blocks of width ``n_basis`` fills
    all ``n_features`` dimensions first.

    Parameters
    ----------
    n_features : int
        Width d of the data.
    n_basis : int
        Width l of the test matrix.
    n_power_iter : int
        Power (block Krylov) iterations asked for.

    Returns
    -------
    int
        Passes.
    """
    return min(n_power_iter + 1, -(-n_features // max(n_basis, 1)))


def randomized_scatter_eigh(
    rows: Rows,
    n_basis: int,
    *,
    n_power_iter: int,
    random_state: np.random.RandomState,
    split_every: int | None = None,
    on_error: Any = None,
    label: str = "randomized eigensolver",
    centre: bool = True,
    sample_weight: Any = None,
) -> RandomizedEigh:
    """Top eigenpairs of the centred scatter of ``rows`` (of ``X^T X`` with ``centre=False``)
    by randomized block Krylov iteration.

    Parameters
    ----------
    rows : Rows
        numpy or dask rows (whole rows in every chunk); with ``centre=False`` they may be
        scipy.sparse CSR rows (in memory, or the blocks of a dask array).
    n_basis : int
        Block width ``l`` (components wanted plus oversampling), at most ``n_features``.
    n_power_iter : int
        Power iterations ``q``; the data is read ``q + 1`` times (fewer if the Krylov space
        fills all ``n_features`` dimensions earlier).
    random_state : numpy.random.RandomState
        Draws the Gaussian test matrix.
    split_every : int, optional
        Fan-in of the merge tree.
    on_error : callable, optional
        ``on_error(exc)`` may translate a ``ValueError`` raised while reading the data (e.g.
        NaN in a block) into the caller's message; it must raise.
    label : str
        Names the job in the progress records (one INFO record per pass, see
        ``ddr.progress``).
    centre : bool
        Iterate on the centred scatter (PCA, default) or on the uncentred ``X^T X``
        (truncated SVD).
    sample_weight : array-like or dask array of shape (n_samples,), optional
        Frequency weights of the rows (``X^T diag(w) X``; uncentred only).

    Returns
    -------
    RandomizedEigh
        With ``min(n_features, n_basis * (passes))`` eigenpairs, of which the first
        ``n_basis - oversampling`` are the accurate ones.

    Notes
    -----
    Every pass applies ``S`` to one d x l block; the block is re-orthonormalised at every step
    against itself AND the earlier blocks (:func:`extend_basis`), and the earlier
    blocks are kept: the final Nystrom step uses the whole block Krylov space
    ``span(Omega, S Omega, ..., S^q Omega)`` together with ``S`` applied to it, all of which
    the passes produced. This contains the subspace-iteration space ``span(S^q Omega)`` (so
    the result is at least as accurate as Halko-Martinsson-Tropp with ``q`` power iterations:
    the Nystrom error shrinks as the test space grows) and converges much faster on slowly
    decaying spectra (Musco and Musco 2015). Memory on the client: two d x l(q+1) float64
    matrices. The client's work between passes (QR, GEMMs and one SVD of d x l(q+1)
    matrices) runs on one BLAS thread: threaded LAPACK synchronises at every panel and, on a
    node whose cores are busy (a login node, a LocalCluster beside its workers), took 15 s
    where one thread takes 1 s (d = 5 000, measured).
    """
    d = rows.shape[1]
    if not 1 <= n_basis <= d:
        raise ValueError(f"n_basis must be between 1 and n_features={d}; got {n_basis}")
    if n_power_iter < 0:
        raise ValueError(f"n_power_iter must be >= 0; got {n_power_iter}")
    passes = Passes(logger, label, randomized_passes(d, n_basis, n_power_iter))
    passes.start(f"{passes.total} passes over the data ({_shape(rows)}), block width {n_basis}")
    with one_blas_thread():
        V = initial_basis(d, n_basis, random_state)
    with passes.step():
        stat = _pass(rows, V, None, split_every, on_error, centre, sample_weight)
    mean, count, trace = stat.mean, stat.count, _trace(stat)
    blocks, images = [V], [stat.product]
    for _ in range(n_power_iter):
        K = np.column_stack(blocks)
        m = K.shape[1]
        if m >= d:  # the Krylov space is all of R^d: S is known exactly on it
            break
        width = min(n_basis, d - m)
        with one_blas_thread():
            V = extend_basis(K, images[-1][:, :width])
        with passes.step():
            stat = _pass(rows, V, mean, split_every, on_error, centre, sample_weight)
        blocks.append(V)
        images.append(stat.product)
    with one_blas_thread():
        lam, U = nystrom_eigh(np.column_stack(blocks), np.column_stack(images))
    return RandomizedEigh(count, mean, trace, lam, U, len(blocks))


def initial_basis(d: int, n_basis: int, random_state: np.random.RandomState) -> np.ndarray:
    """Draw the first block: an orthonormalised Gaussian d x ``n_basis`` matrix.

    Parameters
    ----------
    d : int
        The number of features.
    n_basis : int
        The width of the block.
    random_state : numpy.random.RandomState
        The generator.

    Returns
    -------
    ndarray of shape (d, n_basis)
        Orthonormal columns.
    """
    return orthonormalize(random_state.standard_normal(size=(d, n_basis)))


def single_pass_eigh(stat: CentredProduct | GramProduct, V: np.ndarray) -> RandomizedEigh:
    """Solve a one-pass iteration from that pass's merged statistic for the basis ``V``.

    One pass suffices when ``randomized_passes(...) == 1`` (the first block spans all of
    R^d); for callers that compute the pass together with other work.

    Parameters
    ----------
    stat : CentredProduct or GramProduct
        The merged statistic of the pass.
    V : ndarray of shape (d, l)
        The basis of the pass (:func:`initial_basis`).

    Returns
    -------
    RandomizedEigh
        The eigensystem.
    """
    with one_blas_thread():
        lam, U = nystrom_eigh(V, stat.product)
    return RandomizedEigh(stat.count, stat.mean, _trace(stat), lam, U, 1)


def _trace(stat: CentredProduct | GramProduct) -> float:
    return float(np.maximum(stat.sq, 0).sum())


def _shape(rows: Rows) -> str:
    n, d = rows.shape
    return f"{'?' if np.isnan(n) else int(n)} x {d}"


def _pass(
    rows: Rows,
    V: np.ndarray,
    center: np.ndarray | None,
    split_every: int | None,
    on_error: Any,
    centre: bool = True,
    sample_weight: Any = None,
) -> CentredProduct | GramProduct:
    """One read of the data: the merged CentredProduct (GramProduct when not centring) for
    basis ``V``."""
    try:
        if not rows.is_lazy:
            spec = _spec(V, center, centre)
            return stats_compute(spec, rows.data, None, sample_weight, split_every=split_every)
        (stat,) = dask.compute(
            lazy_pass(rows.data, V, center, split_every, centre=centre, sample_weight=sample_weight)
        )
        return stat
    except ValueError as exc:
        if on_error is None:
            raise
        on_error(exc)
        raise


def lazy_pass(
    X: Any,
    V: np.ndarray,
    center: np.ndarray | None,
    split_every: int | None = None,
    *,
    centre: bool = True,
    sample_weight: Any = None,
) -> Any:
    """The merged :class:`~ddr.stats.CentredProduct` (:class:`~ddr.stats.GramProduct` with
    ``centre=False``) of the dask array ``X`` for basis ``V``, as a Delayed.

    The basis (and the centre) enter the graph once, as their own keys that every block task
    depends on, instead of being embedded in every task: with d = 100 000 columns ``V`` alone
    is 16 MB, and a distributed scheduler then ships it once per worker. The trace is needed
    once: passes with a centre (the later passes) skip the diagonal.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, d)
        The data, one chunk along features.
    V : ndarray of shape (d, l)
        The basis.
    center : ndarray of shape (d,) or None
        The shift the rows are centred on before multiplying (the mean from an earlier
        pass; the result does not depend on it beyond round-off). None (the first pass):
        each block's own, and the diagonal of the scatter (the trace) is accumulated too.
    split_every : int, optional
        Fan-in of the tree merge (default: :func:`ddr.stats.compute`'s).
    centre : bool
        Centre the rows (PCA) or not (truncated SVD: the uncentred ``X^T X``).
    sample_weight : array-like or dask array of shape (n_samples,), optional
        Frequency weights of the rows (uncentred only).

    Returns
    -------
    Delayed
        Computes to the :class:`~ddr.stats.CentredProduct`.
    """
    Vd = dask.delayed(V, pure=True)
    cd = None if center is None else dask.delayed(center, pure=True)
    return stats_lazy(_spec(Vd, cd, centre), X, None, sample_weight, split_every=split_every)


def _spec(V: Any, center: Any, centre: bool) -> Any:
    """The statistic of one pass: the first (no centre known yet) also gathers the column
    moments and the trace."""
    first = center is None
    if centre:
        return CentredProduct.spec(basis=V, center=center, diagonal=first)
    return GramProduct.spec(basis=V, moments=first)
