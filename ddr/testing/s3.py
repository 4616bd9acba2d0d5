"""A real S3 endpoint on loopback, for tests of code that reads and writes object stores.

:func:`start_s3_server` starts moto's S3 server in a subprocess on a random loopback port
with credential checks on (only the requests that create the test user are let through
unsigned), so wrong and missing credentials fail as they would on AWS; code reaches it the
way users reach MinIO-style servers, through ``AWS_ENDPOINT_URL`` and the standard credential
variables (:attr:`S3Server.env`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BUCKET", "REGION", "S3Server", "set_environ", "start_s3_server", "stop_s3_server"]

#: The bucket :func:`start_s3_server` creates.
BUCKET = "ddr-test"
#: The region of the test endpoint.
REGION = "us-east-1"
# create_user, create_access_key, put_user_policy: the only unsigned requests moto accepts
_UNSIGNED_SETUP_REQUESTS = 3


@dataclass
class S3Server:
    """A running S3 endpoint on loopback and the credentials of its test user.

    Parameters
    ----------
    endpoint : str
        ``http://127.0.0.1:<port>``.
    key, secret : str
        The test user's access key.
    bucket : str, default :data:`BUCKET`
        The bucket created for the tests.
    process : subprocess.Popen, optional
        The server's process.
    log : pathlib.Path, optional
        Where the server logs its requests.
    """

    endpoint: str
    key: str
    secret: str
    bucket: str = BUCKET
    process: subprocess.Popen | None = field(default=None, repr=False)
    log: Path | None = field(default=None, repr=False)

    @property
    def env(self) -> dict[str, str]:
        """The environment a user of this endpoint sets."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": REGION,
            # never ask an instance metadata service for credentials (no traffic off loopback)
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def env_without_credentials(self, folder: Path) -> dict[str, str]:
        """Give the environment of this process without AWS credentials, the endpoint kept.

        The variables are removed and the credentials and config files pointed at nothing
        in ``folder``: for a subprocess that must find none.

        Parameters
        ----------
        folder : pathlib.Path
            A folder without AWS files.

        Returns
        -------
        dict
        """
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
        }
        none = str(folder / "no-such-aws-file")
        env.update(AWS_SHARED_CREDENTIALS_FILE=none, AWS_CONFIG_FILE=none)
        return env

    def share_with(self, client: Any, **extra: str) -> None:
        """Give the workers of a distributed ``client`` this environment (and ``extra``).

        Workers started before the server do not have it.

        Parameters
        ----------
        client : distributed.Client
            The client of the workers.
        **extra : str
            More variables.
        """
        client.run(set_environ, {**self.env, **extra})

    def url(self, name: str = "") -> str:
        """A fresh prefix in the test bucket (``s3://ddr-test/<uuid>/name``).

        Parameters
        ----------
        name : str, default ""
            Appended to the prefix.

        Returns
        -------
        str
        """
        return f"s3://{self.bucket}/{uuid.uuid4().hex[:12]}" + (f"/{name}" if name else "")

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=REGION,
        )

    def requests(self, method: str, url: str) -> int:
        """How many requests the server has answered for objects under a URL (its log).

        Parameters
        ----------
        method : str
            ``"GET"``, ``"HEAD"``, ...
        url : str
            An ``s3://bucket/prefix`` URL.

        Returns
        -------
        int
        """
        if self.log is None:
            return 0
        time.sleep(0.3)  # the server logs a request after its response
        target = f"{method} /{url.removeprefix('s3://')}"
        with self.log.open(errors="replace") as fh:
            return sum(target in line for line in fh)  # (some lines are coloured)

    def keys(self, prefix: str) -> list[str]:
        """Every object key under an ``s3://bucket/prefix`` URL (listed with boto3).

        Parameters
        ----------
        prefix : str
            The URL.

        Returns
        -------
        list of str
        """
        bucket, _, key = prefix.removeprefix("s3://").partition("/")
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


def set_environ(values: dict[str, str]) -> None:
    """``os.environ.update(values)`` in this process.

    For ``client.run``: a bound method of ``os.environ`` would be pickled with a copy of the
    environment and update that.

    Parameters
    ----------
    values : dict
        The variables to set.
    """
    os.environ.update(values)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3_server(log: Path) -> S3Server:
    """Start moto's S3 server on a random loopback port, with a test user and bucket.

    moto's server (``pip install 'moto[server]'``) runs on a random loopback port, with
    credential checks on, and create a user with S3 rights and the bucket :data:`BUCKET`.
    Its output goes to ``log``. Stop it with :func:`stop_s3_server`.

    Parameters
    ----------
    log : pathlib.Path
        Where the server's output goes.

    Returns
    -------
    S3Server
    """
    import boto3

    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_UNSIGNED_SETUP_REQUESTS)}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
        )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto's server did not start:\n{log.read_text()}") from None
            time.sleep(0.1)
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
        region_name=REGION,
    )
    iam.create_user(UserName="ddr")
    key = iam.create_access_key(UserName="ddr")["AccessKey"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName="ddr", PolicyName="s3", PolicyDocument=json.dumps(policy))
    server = S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], process=proc, log=log)
    server.client().create_bucket(Bucket=BUCKET)
    return server


def stop_s3_server(server: S3Server) -> None:
    """Stop the server :func:`start_s3_server` started (terminate, then kill after 10 s).

    Parameters
    ----------
    server : S3Server
        What :func:`start_s3_server` returned.
    """
    if server.process is not None and server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
