"""A server error S3 asks clients to try again (500 InternalError, 503 SlowDown) is tried
again within ddr's bounded tries, not raised at once: ddr keeps botocore to one attempt and
s3fs tries none of them again, so one such answer ended a run (moto's server gave one, a
500 for an object read while it was being replaced, in the claims tests).

Real parts only: an S3 endpoint on loopback, a plain HTTP server answering GetObject, that
answers the first requests with the error S3 gives.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ddr.io.locations import Location, resolve

BODY = b"the object's bytes"
ERRORS = {
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
    403: ("AccessDenied", "Access Denied"),
}


class _Endpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, status: int, errors: int) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.status, self.errors_left, self.requests = status, errors, 0


class _Answer(BaseHTTPRequestHandler):
    server: _Endpoint

    def do_GET(self) -> None:
        self.server.requests += 1
        if self.server.errors_left > 0:
            self.server.errors_left -= 1
            code, message = ERRORS[self.server.status]
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>"
            ).encode()
            self.send_response(self.server.status)
            self.send_header("Content-Type", "application/xml")
        else:
            body = BODY
            self.send_response(200)
            self.send_header("Content-Type", "binary/octet-stream")
            self.send_header("ETag", '"0123456789abcdef"')
            self.send_header("Last-Modified", "Fri, 27 Nov 2026 00:00:00 GMT")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:  # the object's size and version: never an error
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("ETag", '"0123456789abcdef"')
        self.send_header("Last-Modified", "Fri, 27 Nov 2026 00:00:00 GMT")
        self.end_headers()

    def log_message(self, *args: object) -> None:  # quiet
        pass


@contextlib.contextmanager
def _endpoint(status: int, errors: int) -> Iterator[_Endpoint]:
    server = _Endpoint(status, errors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _object(server: _Endpoint, tries: int = 5) -> Location:
    """The endpoint's object as ddr reaches an object on S3."""
    url = f"http://127.0.0.1:{server.server_address[1]}"
    options = {"endpoint_url": url, "key": "k", "secret": "s", "tries": tries}
    return resolve("s3://bucket/key", options)


@pytest.mark.parametrize("status", [500, 503])
def test_a_server_error_to_try_again_is_tried_again(status):
    with _endpoint(status, errors=2) as server:
        assert _object(server).read_bytes() == BODY
        assert server.requests == 3


def test_the_server_error_is_raised_once_no_try_is_left():
    with _endpoint(500, errors=10) as server:
        with pytest.raises(OSError, match="We encountered an internal error"):
            _object(server, tries=3).read_bytes()
        assert server.requests == 3


def test_an_error_not_to_try_again_is_raised_at_once():
    with _endpoint(403, errors=10) as server:
        with pytest.raises(PermissionError):
            _object(server).read_bytes()
        assert server.requests == 1
