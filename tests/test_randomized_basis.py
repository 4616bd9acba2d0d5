"""The next Krylov block (``extend_basis``); the sparse column moments of TruncatedSVD's pass 1."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse

from ddr.linalg.randomized import extend_basis, orthonormalize
from ddr.stats._sparse import column_moments


def _check_extension(K: np.ndarray, Z: np.ndarray, Q: np.ndarray) -> None:
    assert Q.shape == Z.shape
    assert np.abs(K.T @ Q).max() < 1e-12
    assert np.abs(Q.T @ Q - np.eye(Q.shape[1])).max() < 1e-12


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_extend_basis_spans_what_householder_of_both_spans(scale, caplog):
    rng = np.random.default_rng(0)
    d, m, width = 400, 60, 12
    K = orthonormalize(rng.standard_normal((d, m)))
    # columns mostly inside span(K), their outside parts spread over 6 orders of magnitude
    # what a Krylov image looks like late in the iteration
    outside = rng.standard_normal((d, width)) * np.logspace(0, -6, width) * scale
    Z = K @ rng.standard_normal((m, width)) + outside
    with caplog.at_level(logging.DEBUG, logger="ddr.linalg.randomized"):
        Q = extend_basis(K, Z)
    assert "lost orthogonality" not in caplog.text  # the Gram-Schmidt path, no fallback
    _check_extension(K, Z, Q)
    reference = orthonormalize(np.column_stack([K, Z]))[:, m:]
    # nested spans in column order: the same columns up to sign
    for j in range(width):
        projection = reference[:, : j + 1].T @ Q[:, j]
        assert np.linalg.norm(projection) == pytest.approx(1.0, abs=1e-6)


def test_extend_basis_completes_an_exhausted_krylov_space():
    rng = np.random.default_rng(1)
    d, m, width = 50, 40, 10
    K = orthonormalize(rng.standard_normal((d, m)))
    Z = K @ rng.standard_normal((m, width))  # nothing outside span(K)
    direction = rng.standard_normal(d)
    direction -= K @ (K.T @ direction)
    Z[:, 3] += 1e-3 * direction  # one direction outside
    Q = extend_basis(K, Z)  # the other nine: any orthonormal completion
    _check_extension(K, Z, Q)
    inside = Q.T @ (direction / np.linalg.norm(direction))
    assert np.linalg.norm(inside) == pytest.approx(1.0, abs=1e-10)
    full = np.column_stack([K, Q])
    np.testing.assert_allclose(full @ full.T, np.eye(d), atol=1e-12)  # all of R^d


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_column_moments_equal_numpy_on_the_dense_block(offset):
    X = scipy.sparse.random(300, 40, density=0.2, format="csr", random_state=3, dtype=np.float32)
    X.data = (X.data * 7 + offset).astype(np.float32)
    X = scipy.sparse.csr_matrix(X.multiply(np.arange(40) != 5))  # an all-zero column
    dense = X.toarray().astype(np.float64)
    count, mean, sq = column_moments(X)
    assert count == 300
    np.testing.assert_allclose(mean, dense.mean(axis=0), rtol=1e-14, atol=0)
    expected = ((dense - dense.mean(axis=0)) ** 2).sum(axis=0)
    np.testing.assert_allclose(sq, expected, rtol=1e-10, atol=1e-10 * expected.max())
    assert sq[5] == mean[5] == 0.0


def test_column_moments_of_an_empty_block():
    count, mean, sq = column_moments(scipy.sparse.csr_matrix((0, 7)))
    assert count == 0.0
    np.testing.assert_array_equal(mean, np.zeros(7))
    np.testing.assert_array_equal(sq, np.zeros(7))
