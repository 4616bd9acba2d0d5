"""Sparse rows in Zarr: CSR groups in AnnData's layout read as dask arrays of scipy.sparse
blocks (written by anndata itself and by ddr), on paths and URLs, and every inconsistency in
them refused with its message."""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import scipy.sparse
import zarr

import ddr
from ddr.demo_counts import CountsSpec, write_counts_data
from ddr.io.csr import CsrWriter, open_csr, write_feature_names


def _matrix(n=300, d=40, density=0.1, seed=0, dtype=np.float32):
    X = scipy.sparse.random(n, d, density=density, format="csr", random_state=seed)
    X.data = np.ceil(X.data * 5).astype(dtype)
    X = X.astype(dtype)
    X[7] = 0  # an empty row
    X.eliminate_zeros()
    return X.tocsr()


def _write(path, X, names=None, chunk_nnz=64, blocks=(100, 150, 50)):
    root = zarr.open_group(str(path), mode="w")
    w = CsrWriter(root, "X", X.shape[1], X.dtype, chunk_nnz=chunk_nnz)
    start = 0
    for b in blocks:
        w.append(X[start : start + b])
        start += b
    w.close()
    if names is not None:
        write_feature_names(root, names)
    return root


@pytest.mark.parametrize("chunk_rows", [None, 1, 37, 299, 1000])
def test_a_csr_group_written_by_anndata_reads_back_exactly(tmp_path, chunk_rows):
    ad = pytest.importorskip("anndata")
    X = _matrix()
    a = ad.AnnData(X)
    a.var_names = [f"w{i}" for i in range(X.shape[1])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a.write_zarr(tmp_path / "a.zarr")  # Zarr v2, int32 indptr
    blocks = open_csr(tmp_path / "a.zarr", "X", chunk_rows=chunk_rows)
    assert isinstance(blocks._meta, scipy.sparse.csr_matrix)
    assert blocks.shape == X.shape and blocks.dtype == X.dtype
    assert len(blocks.chunks[1]) == 1
    if chunk_rows == 299:
        assert blocks.chunks[0] == (299, 1)  # a one-row last block
    parts = dask.compute(*blocks.to_delayed().ravel())
    assert all(isinstance(p, scipy.sparse.csr_matrix) for p in parts)
    got = scipy.sparse.vstack(parts)
    assert (got != X).nnz == 0 and got.dtype == X.dtype
    arr = ddr.io.open_input(tmp_path / "a.zarr", "X")
    assert arr.dims == ("sample", "feature")
    np.testing.assert_array_equal(arr["feature"].values, a.var_names.to_numpy())
    assert len(arr.data.chunks[0]) == 8  # small data is still cut in 8 blocks


def test_a_corpus_written_by_ddr_is_read_by_anndata_and_by_ddr(tmp_path):
    ad = pytest.importorskip("anndata")
    from anndata.io import read_elem

    spec = CountsSpec(n_samples=700, n_features=60, n_topics=3, doc_length=20, chunk_rows=90)
    write_counts_data(tmp_path / "c.zarr", spec)
    group = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")
    theirs = read_elem(group["X"])
    ours = ddr.io.open_input(tmp_path / "c.zarr", "X").data.compute()
    assert ad is not None and (theirs != ours).nnz == 0
    assert list(read_elem(group["var"]).index[:2]) == ["w00", "w01"]
    np.testing.assert_array_equal(
        np.asarray(ours.sum(axis=1)).ravel(),
        ddr.io.open_input(tmp_path / "c.zarr", "doc_length").values,
    )


def test_the_writer_writes_whole_chunks_and_the_reader_every_value_once(tmp_path):
    X = _matrix(n=500, d=30, density=0.2)
    root = _write(tmp_path / "w.zarr", X, chunk_nnz=128, blocks=(1, 200, 0, 299))
    data = root["X"]["data"]
    assert data.chunks == (128,) and data.nchunks_initialized == data.nchunks
    got = open_csr(tmp_path / "w.zarr", "X", chunk_rows=64).compute()
    assert (got != X).nnz == 0
    assert dict(root["X"].attrs) == {
        "encoding-type": "csr_matrix",
        "encoding-version": "0.1.0",
        "shape": [500, 30],
    }


def test_a_root_csr_group_opens_without_a_name(tmp_path):
    X = _matrix()
    root = zarr.open_group(str(tmp_path / "r.zarr"), mode="w")
    w = CsrWriter(root, "X", X.shape[1], X.dtype)
    w.append(X)
    w.close()
    arr = ddr.io.open_input(tmp_path / "r.zarr/X")
    assert (arr.data.compute() != X).nnz == 0


def test_urls_memory_and_s3(s3):
    spec = CountsSpec(n_samples=400, n_features=50, n_topics=3, doc_length=15, chunk_rows=70)
    local = None
    for url in ("memory://ddr-csr-test/c.zarr", s3.url("c.zarr")):
        write_counts_data(url, spec)
        with dask.config.set(scheduler="threads"):
            X = ddr.io.open_input(url, "X").data.compute()
        local = X if local is None else local
        assert (X != local).nnz == 0 and X.shape == (400, 50)


# ---------------------------------------------------------------------------- bad input
def _tampered(tmp_path, change):
    X = _matrix(n=120, d=20)
    root = _write(tmp_path / "t.zarr", X, blocks=(120,))
    change(root["X"])
    return tmp_path / "t.zarr"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g.attrs.update({"shape": [121, 20]}),
         r"'indptr' has 121 entries; shape \[121, 20\] needs n_rows \+ 1 = 122"),
        (lambda g: g.attrs.update({"shape": [120]}),
         "the attribute 'shape' must be two non-negative ints; got"),
        (lambda g: g.attrs.update({"encoding-type": "csc_matrix"}),
         "encoding-type is 'csc_matrix', not 'csr_matrix' \\(CSC stores columns"),
        (lambda g: g.attrs.__delitem__("encoding-version"),
         "the attribute 'encoding-version' is missing"),
        (lambda g: g["indptr"].__setitem__(120, 5),
         "'indptr' runs from 0 to 5; it must run from 0 to len\\(data\\)"),
        (lambda g: g["data"].resize((g["data"].shape[0] - 1,)),
         "'data' has .* values and 'indices' .*; they must be equal"),
        (lambda g: g.__delitem__("indptr"), "the array 'indptr' is missing"),
    ],
)  # fmt: skip
def test_metadata_that_do_not_describe_a_csr_matrix_are_refused_before_reading(
    tmp_path, change, message
):
    path = _tampered(tmp_path, change)
    with pytest.raises(ValueError, match=f"CSR group '.*t.zarr/X': {message}"):
        open_csr(path, "X")
    with pytest.raises(ValueError, match=message):
        ddr.io.open_input(path, "X")


def test_inconsistent_offsets_and_columns_are_refused_by_the_block_that_reads_them(tmp_path):
    def decreasing(g):
        ptr = g["indptr"][:]
        ptr[50] = ptr[49] - 1
        g["indptr"][:] = ptr

    blocks = open_csr(_tampered(tmp_path, decreasing), "X", chunk_rows=30)
    blocks.blocks[0].compute()  # rows 0..30 are fine
    with pytest.raises(ValueError, match=r"'indptr' decreases at row 49 .*never decrease"):
        blocks.blocks[1].compute()

    def out_of_range(g):
        cols = g["indices"][:]
        cols[3] = 20
        g["indices"][:] = cols

    path = tmp_path / "u"
    path.mkdir()
    blocks = open_csr(_tampered(path, out_of_range), "X")
    bad = r"column indices \[20\] in rows .* outside \[0, n_cols=20\)"
    with pytest.raises(ValueError, match=bad):
        blocks.compute()


def test_an_array_where_a_csr_group_is_expected(tmp_path):
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(3,), dtype="f8")
    with pytest.raises(ValueError, match="this is an array, not a group of data, indices"):
        open_csr(tmp_path / "a.zarr")


@pytest.mark.parametrize("chunk_rows", [None, 1, 37, 120])
def test_a_pass_reads_every_stored_chunk_once_whatever_the_blocks(tmp_path, chunk_rows):
    """Blocks that do not align with the chunks of data, indices and indptr: each chunk is
    read by one task and shared, so a pass reads the stored bytes once (counted through the
    pipeline's counting store, as a run's summary counts them)."""
    from ddr.io.csr import csr_blocks
    from ddr.pipeline._counting import CountingStore, counted_call, read_counts, stored_bytes

    X = _matrix(n=500, d=30, density=0.2)
    _write(tmp_path / "w.zarr", X, chunk_nnz=128, blocks=(1, 200, 0, 299))
    store = CountingStore(tmp_path / "w.zarr", read_only=True)
    group = zarr.open_group(store=store, path="X", mode="r")
    blocks = csr_blocks(group, "w.zarr/X", chunk_rows, read=counted_call)
    before = read_counts()
    with dask.config.set(scheduler="threads"):
        got = scipy.sparse.vstack(dask.compute(*blocks.to_delayed().ravel()))
    after = read_counts()
    assert (got != X).nnz == 0
    read = sum(v - before.get(k, 0) for k, v in after.items() if "::X/" in k)
    assert read == stored_bytes(tmp_path / "w.zarr", "X")


def _counted_pass(path, **kwargs):
    """One pass (every block, on threads) over the CSR group ``X`` at ``path`` read through
    the pipeline's counting store: the blocks, the matrix, the chunk bytes read, the bytes
    stored."""
    from ddr.io.csr import csr_blocks
    from ddr.pipeline._counting import CountingStore, counted_call, read_counts, stored_bytes

    store = CountingStore(path, read_only=True)
    blocks = csr_blocks(zarr.open_group(store=store, path="X", mode="r"), "X", read=counted_call,
                        **kwargs)  # fmt: skip
    before = read_counts()
    with dask.config.set(scheduler="threads"):
        got = blocks.compute()
    read = sum(v - before.get(k, 0) for k, v in read_counts().items() if "::X/" in k)
    return blocks, got, read, stored_bytes(path, "X")


@pytest.mark.parametrize(
    ("spec", "chunk_rows"),
    [
        (CountsSpec(n_samples=3000, n_features=200, n_topics=4, doc_length=40), None),
        (CountsSpec(n_samples=800, n_features=60, n_topics=3, doc_length=60, chunk_rows=200,
                    seed=1), None),  # the examples' corpus
        (CountsSpec(n_samples=3000, n_features=200, n_topics=4, doc_length=40), 77),
    ],
)  # fmt: skip
def test_a_pass_over_a_demo_corpus_reads_its_stored_bytes_once(tmp_path, spec, chunk_rows):
    write_counts_data(tmp_path / "c.zarr", spec)
    stored = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["X"]
    blocks, got, read, n_bytes = _counted_pass(tmp_path / "c.zarr", chunk_rows=chunk_rows)
    assert read == n_bytes and len(blocks.chunks[0]) >= 8
    truth = scipy.sparse.csr_matrix(
        (stored["data"][:], stored["indices"][:], stored["indptr"][:]), shape=got.shape
    )
    assert (got != truth).nnz == 0


def test_chunks_of_other_sizes_in_each_array_are_read_once(tmp_path):
    """data, indices and indptr chunked differently (indptr in several chunks), as other
    writers may store them."""
    X = _matrix(n=2000, d=50, density=0.2)
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w").create_group("X")
    g.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0",
                    "shape": list(X.shape)})  # fmt: skip
    for name, values, chunk in (("data", X.data, 1000), ("indices", X.indices, 700),
                                ("indptr", X.indptr.astype(np.int64), 300)):  # fmt: skip
        g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=(chunk,))[:] = values
    _, got, read, n_bytes = _counted_pass(tmp_path / "s.zarr")
    assert read == n_bytes and (got != X).nnz == 0


@pytest.mark.parametrize("part", ["data", "indices", "indptr"])
def test_a_corrupt_chunk_names_its_array_and_key(tmp_path, part):
    from ddr.io import CorruptChunkError

    spec = CountsSpec(n_samples=3000, n_features=200, n_topics=4, doc_length=40)
    write_counts_data(tmp_path / "c.zarr", spec)
    blocks = open_csr(tmp_path / "c.zarr", "X")
    (tmp_path / f"c.zarr/X/{part}/c/0").write_bytes(b"not zstd at all")
    with pytest.raises(CorruptChunkError, match=rf"chunk c/0 of .*c.zarr/X/{part} is corrupt"):
        blocks.compute(scheduler="threads")
