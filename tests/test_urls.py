"""Every path may be a URL: locations (normalised, compared, redacted), ddr.io on memory:// and
on a real S3 endpoint (moto's server), and every bad input with its error and message, and
nothing written."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

import ddr
from ddr.cli import app
from ddr.io import from_zarr, open_input, output_status, read_attrs, write_zarr
from ddr.io.locations import LocationError, redact, resolve
from ddr.io.zarr_chunks import StoredChunks


# ---------------------------------------------------------------- locations, no network
@pytest.mark.parametrize(
    "a, b",
    [
        ("s3://b-1/x", "s3://b-1/x/"),
        ("s3://b-1/x", "s3://b-1/./x"),
        ("s3://b-1/x", "s3://b-1//x"),
        ("s3://b-1/x", "s3://b-1/y/../x"),
        ("gs://b-1/x", "gcs://b-1/x"),
        ("az://c/x", "abfs://c/x/"),
        ("memory://x/y", "memory:///x/y"),
        ("file:///tmp/a", "/tmp/a"),
        ("file:///tmp/a/", "/tmp/./a"),
    ],
)
def test_locations_compare_normalised(a, b):
    assert resolve(a) == resolve(b)
    assert hash(resolve(a)) == hash(resolve(b))
    assert resolve(a).url == resolve(b).url


def test_locations_contain_by_path_segments():
    root = resolve("s3://bucket/data/x.zarr")
    assert root.contains(resolve("s3://bucket/data/x.zarr/X/c/0/0"))
    assert root.contains(resolve("s3://bucket/data/./x.zarr/"))
    assert not root.contains(resolve("s3://bucket/data/x.zarr2"))
    assert not root.contains(resolve("gs://bucket/data/x.zarr/a"))
    assert resolve("s3://bucket/data/x.zarr/a").overlaps(root)
    assert not resolve("s3://other/data/x.zarr").overlaps(root)
    assert resolve("memory://a/b").contains(resolve("memory://a/b/c"))


@pytest.mark.parametrize(
    "url, message",
    [
        ("s3:/bucket/x", "'s3:/bucket/x' is not a URL: did you mean 's3://bucket/x'?"),
        ("s3:bucket/x", "'s3:bucket/x' is not a URL: did you mean 's3://bucket/x'?"),
        (
            "S3://bucket/x",
            "'S3://bucket/x': URL schemes are lower case; did you mean s3:'//bucket/x'?",
        ),
        ("Gs://bucket/x", "URL schemes are lower case"),
        ("s4://bucket/x", "unknown URL scheme 's4'; ddr reads and writes s3://, gs://"),
        ("s3://", "the URL names no bucket or container"),
        ("s3://bucket/../x", "'..' leads outside the bucket"),
        ("file://host/x", "file:// URLs name a local path"),
    ],
)
def test_malformed_urls_are_refused(url, message):
    with pytest.raises(LocationError) as err:
        resolve(url)
    assert message in str(err.value)


def test_credentials_inside_a_url_are_refused_without_echoing_them():
    with pytest.raises(LocationError) as err:
        resolve("https://user:hunter2pass@example.org/data.zarr")
    assert "hunter2pass" not in str(err.value)
    assert "give them in storage_options or the environment" in str(err.value)


def test_storage_options_are_for_urls_only(tmp_path):
    with pytest.raises(LocationError, match="storage_options were given for the local path"):
        resolve(tmp_path / "x.zarr", {"anon": True})


def test_a_colon_in_a_file_name_is_a_local_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loc = resolve("run:1/x.zarr")
    assert loc.is_local and loc.path == str(tmp_path / "run:1" / "x.zarr")


def test_http_is_read_only():
    loc = resolve("https://example.org/data.zarr")
    assert loc.read_only
    with pytest.raises(LocationError, match=r"https:// URLs are read-only"):
        loc.check_writable()
    with pytest.raises(LocationError, match=r"https:// URLs are read-only"):
        write_zarr(np.zeros((2, 2)), "https://example.org/out.zarr")


def test_redaction_of_options_and_text():
    opts = {
        "key": "AKIAEXAMPLEKEY",
        "secret": "s3cr3t-value-123",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"aws_session_token": "tok-456789"},
        "anon": False,
    }
    loc = resolve("s3://bucket/x", opts)
    assert "s3cr3t" not in repr(loc) and "s3cr3t" not in str(loc)
    shown = redact({"storage_options": opts, "note": "failed with s3cr3t-value-123 and tok-456789"})
    assert shown["storage_options"] == {
        "key": "***",
        "secret": "***",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"aws_session_token": "***"},
        "anon": False,
    }
    assert shown["note"] == "failed with *** and ***"


# ------------------------------------------------------------------------- memory://
def test_memory_urls_round_trip():
    url = "memory://ddr-tests/round-trip.zarr"
    X = np.random.default_rng(0).standard_normal((500, 6)).astype("f4")
    with dask.config.set(scheduler="threads"):
        write_zarr(da.from_array(X, chunks=(200, 6)), url, name="X", fingerprint="f1")
        assert output_status(url) == "complete"
        assert output_status("memory:///ddr-tests/round-trip.zarr/") == "complete"
        assert read_attrs(url)["ddr:fingerprint"] == "f1"
        got = open_input(url, "X", protect=False)
        np.testing.assert_array_equal(got.values, X)
        np.testing.assert_array_equal(from_zarr(url, "X").compute(), X)
        pca = ddr.PCA(3).fit(X)
        pca.save("memory://ddr-tests/pca.zarr")
        back = ddr.load("memory://ddr-tests/pca.zarr")
    np.testing.assert_array_equal(back.components_, pca.components_)
    resolve(url).remove()
    assert output_status(url) == "missing"


# ------------------------------------------------------------------------------- http
@pytest.fixture
def http_root(tmp_path):
    """A static HTTP server on a random loopback port serving ``tmp_path``."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=tmp_path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_inputs_and_models_read_only(http_root):
    root, url = http_root
    X = np.random.default_rng(3).standard_normal((400, 5))
    with dask.config.set(scheduler="threads"):
        write_zarr(da.from_array(X, chunks=(150, 5)), root / "data.zarr", name="X")
        ddr.PCA(2).fit(X).save(root / "pca.zarr")
        got = open_input(f"{url}/data.zarr", "X")
        np.testing.assert_array_equal(got.values, X)
        np.testing.assert_array_equal(from_zarr(f"{url}/data.zarr", "X").compute(), X)
        model = ddr.load(f"{url}/pca.zarr")
    assert output_status(f"{url}/data.zarr") == "complete"
    np.testing.assert_allclose(model.transform(X), ddr.load(root / "pca.zarr").transform(X))
    shown = CliRunner().invoke(app, ["inspect", f"{url}/pca.zarr"])
    assert shown.exit_code == 0 and shown.output.startswith(f"{url}/pca.zarr: complete")
    with pytest.raises(LocationError, match="http:// URLs are read-only"):
        ddr.PCA(2).fit(X).save(f"{url}/other.zarr")
    assert not (root / "other.zarr").exists()


# --------------------------------------------------------------------------------- S3
def _data(n=3000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)) * np.arange(1, d + 1) + 1e3).astype("f4")


def test_s3_round_trip_on_the_cluster(s3, s3_client):
    """write_zarr, open_input, from_zarr, est.save / ddr.load on S3, computed by the workers;
    ddr's own decoder reads the remote chunks."""
    url = s3.url("data.zarr")
    X = _data()
    write_zarr(da.from_array(X, chunks=(1000, 8)), url, name="X", fingerprint="fp")
    keys = s3.keys(url)
    assert sorted(k.split(".zarr/", 1)[1] for k in keys) == [
        "X/c/0/0",
        "X/c/1/0",
        "X/c/2/0",
        "X/zarr.json",
        "zarr.json",
    ]
    assert output_status(url) == "complete"
    arr = open_input(url, "X")
    np.testing.assert_array_equal(arr.values, X)
    lazy = from_zarr(url, "X")
    z = zarr.open_array(store=resolve(url).store(), path="X")
    assert StoredChunks(z).decoder is not None  # ddr decodes remote chunks itself
    chunks = f"{url}/X/c/"
    gets, heads = s3.requests("GET", chunks), s3.requests("HEAD", chunks)
    np.testing.assert_array_equal(lazy.compute(), X)
    # one GET per chunk (with s3fs's default max_concurrency, a HEAD and a GET)
    assert (s3.requests("GET", chunks) - gets, s3.requests("HEAD", chunks) - heads) == (3, 0)
    pca = ddr.PCA(4).fit(arr)
    ref = ddr.PCA(4).fit(X.astype("f8"))
    np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=1e-10)
    model = s3.url("pca.model.zarr")
    pca.save(model)
    np.testing.assert_array_equal(ddr.load(model).components_, pca.components_)
    # an output at, inside or around the input is refused by normalised URL
    _, prefix = url.removeprefix("s3://").split("/", 1)
    for bad in (url + "/", url.replace(f"/{prefix}", f"/./{prefix}"), url + "/sub.zarr"):
        with pytest.raises(ValueError, match="it would overwrite the input"):
            write_zarr(np.zeros(3), bad)
    with pytest.raises(ValueError, match="it would overwrite the input"):
        write_zarr(np.zeros(3), url.rsplit("/", 1)[0])


def test_s3_storage_options_and_no_secret_anywhere(s3, monkeypatch, caplog):
    """Credentials given in storage_options only: everything works, and the secret appears
    in nothing ddr writes, logs or raises."""
    import logging

    caplog.set_level(logging.DEBUG)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    opts = {"key": s3.key, "secret": s3.secret, "endpoint_url": s3.endpoint}
    url = s3.url("opts.zarr")
    X = _data(600, 4)
    with dask.config.set(scheduler="threads"):
        write_zarr(
            X,
            url,
            name="X",
            storage_options=opts,
            provenance={"inputs": {"X": {"storage_options": opts}}},
        )
        got = open_input(url, "X", storage_options=opts)
        np.testing.assert_array_equal(got.values, X)
        attrs = read_attrs(url, storage_options=opts)
    body = json.dumps(attrs)
    assert s3.secret not in body and "***" in body
    for key in s3.keys(url):
        data = s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()
        assert s3.secret.encode() not in data
    bad = {**opts, "secret": "wrong-" + s3.secret[6:]}
    with pytest.raises(PermissionError) as err:
        open_input(url, "X", storage_options=bad)
    assert "access denied" in str(err.value) and url in str(err.value)
    assert s3.secret[6:] not in str(err.value)
    assert f"zarr FsspecStore for {url} (read_only=True, storage_options=" in caplog.text
    assert "'secret': '***'" in caplog.text
    assert s3.secret not in caplog.text and s3.secret[6:] not in caplog.text


def test_wrong_credentials_write_nothing(s3):
    url = s3.url("denied.zarr")
    bad = {"key": s3.key, "secret": "not-the-secret-0123456789"}
    with pytest.raises(PermissionError) as err:
        write_zarr(np.zeros((4, 2)), url, storage_options=bad)
    message = str(err.value)
    assert message.startswith(f"{url}: access denied (endpoint {s3.endpoint}) (wrong or missing")
    assert "not-the-secret-0123456789" not in message
    assert s3.keys(url) == []


def test_missing_bucket_for_inputs_and_outputs(s3):
    with pytest.raises(FileNotFoundError) as err:
        open_input("s3://no-such-bucket/x.zarr", "X")
    assert str(err.value) == (
        f"s3://no-such-bucket/x.zarr: the bucket 'no-such-bucket' does not exist (endpoint "
        f"{s3.endpoint})"
    )
    with pytest.raises(FileNotFoundError) as err:
        write_zarr(np.zeros(3), "s3://no-such-bucket/out.zarr")
    assert str(err.value) == (
        f"s3://no-such-bucket/out.zarr: the bucket 'no-such-bucket' does not exist (endpoint "
        f"{s3.endpoint})"
    )
    names = [b["Name"] for b in s3.client().list_buckets()["Buckets"]]
    assert names == [s3.bucket]


def test_an_endpoint_that_does_not_answer_times_out(s3):
    """A server that accepts connections and never answers: a TimeoutError naming the URL
    and the endpoint, after the configured wait, not a hang."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        opts = {
            "endpoint_url": endpoint,
            "config_kwargs": {"read_timeout": 1, "connect_timeout": 1},
        }
        start = time.monotonic()
        with pytest.raises(TimeoutError) as err:
            open_input("s3://ddr-test/x.zarr", "X", storage_options=opts)
        elapsed = time.monotonic() - start
    assert str(err.value).startswith(
        f"s3://ddr-test/x.zarr: the storage endpoint did not answer in time (endpoint "
        f"{endpoint}) while trying to read (5 tries, each 1 s to connect and 1 s for the "
        "answer; "
    )
    assert str(err.value).endswith(" s in all); check the endpoint URL and the network")
    assert elapsed < 12  # 5 tries of 1 s and the back-off between them (1.9 s); more in
    # tests/test_store_stalls.py
    # without options the waits are finite too
    config = resolve("s3://b-1/x")._options()["config_kwargs"]
    assert config["read_timeout"] == 30 and config["connect_timeout"] == 5


def _cli(args, env, tmp_path):
    return subprocess.run(
        [sys.executable, "-m", "ddr.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_credentials_say_so_and_write_nothing(s3, tmp_path):
    env = s3.env_without_credentials(tmp_path)
    url = s3.url("nocreds.zarr")
    args = ["demo-data", url, "--n-samples", "100", "--n-features", "4", "--rank", "2"]
    result = _cli(args, env, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"ddr: error: {url}: no credentials found (endpoint {s3.endpoint}); set "
        "them in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
        "...) or in storage_options"
    )
    assert s3.keys(url) == []


def test_a_missing_filesystem_names_the_cloud_extra(tmp_path):
    code = (
        "import sys; sys.modules['s3fs'] = None; sys.argv = ['ddr', 'inspect', "
        "'s3://bucket/x.zarr']; from ddr.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "ddr: error: s3://bucket/x.zarr: s3:// URLs need the package s3fs, which is not "
        "installed; install it with pip install 'ddr-stats[cloud]'"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url, message",
    [
        ("s3:/ddr-test/demo.zarr", "'s3:/ddr-test/demo.zarr' is not a URL: did you mean"),
        ("S3://ddr-test/demo.zarr", "URL schemes are lower case; did you mean s3:"),
    ],
)
def test_demo_data_refuses_scheme_typos_and_writes_nothing(url, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo-data", url, "--n-samples", "100"])
    assert result.exit_code == 2
    assert message in result.output
    assert list(tmp_path.iterdir()) == []  # no local folder named "s3:" or "S3:"


def test_demo_data_and_inspect_on_s3(s3):
    url = s3.url("demo.zarr")
    with dask.config.set(scheduler="threads"):
        result = CliRunner().invoke(
            app, ["demo-data", url, "--n-samples", "1000", "--n-features", "6", "--rank", "3"]
        )
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(app, ["inspect", url])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0] == f"{url}: complete"
    assert "X: (1000, 6) dims ('sample', 'feature') float32" in shown.output
    missing = CliRunner().invoke(app, ["inspect", url + "-nothing"])
    assert missing.exit_code == 2 and "missing" in missing.output
