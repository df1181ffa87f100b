"""An S3-compatible store on 127.0.0.1 for the tests: moto's server in its own process (DVC,
MLflow and boto3 reach it over HTTP as they would a real endpoint), credentials through the
standard AWS environment variables, never stored in the project."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Emulator:
    endpoint: str
    env: dict[str, str] = field(default_factory=dict)

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name=self.env["AWS_DEFAULT_REGION"],
        )

    def bucket(self, name: str) -> str:
        """Create bucket `name` (if missing); its s3:// URL."""
        s3 = self.client()
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=name)
        return f"s3://{name}"

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        s3 = self.client()
        out: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)


@contextlib.contextmanager
def running_s3(port: int | None = None, env: dict[str, str] | None = None) -> Iterator[S3Emulator]:
    """`env`: extra environment of the server (e.g. moto's INITIAL_NO_AUTH_ACTION_COUNT)."""
    port = port or free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the S3 emulator did not start on {endpoint}") from None
                time.sleep(0.2)
        yield S3Emulator(
            endpoint,
            {
                "AWS_ACCESS_KEY_ID": "ragrig-test-key",
                "AWS_SECRET_ACCESS_KEY": "ragrig-test-secret",
                "AWS_DEFAULT_REGION": "us-east-1",
            },
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Emulator]:
    with running_s3() as emulator:
        yield emulator
