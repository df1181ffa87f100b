"""A throwaway PostgreSQL cluster for the tests (fixture `postgres`): initdb into a temporary
folder, started on a free port of 127.0.0.1 with ragrig.tracking.postgres (the code of `make postgres`),
a role and database `ragrig` with a random password, stopped and removed at the end of the
session. Import with `from tests.pg_cluster import postgres  # noqa: F401`.

Without Debian's PostgreSQL binaries the tests using it skip, saying so; under CI=true they must
be there (`make test` installs them) and their absence fails.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragrig.tracking.postgres import Cluster, bin_dir

from .s3_emulator import free_port

USER = "ragrig"
DB = "ragrig"


@dataclass
class Postgres:
    cluster: Cluster
    password: str  # the role's, given to clients through PGPASSWORD only

    @property
    def port(self) -> int:
        return self.cluster.port

    @property
    def uri(self) -> str:
        return self.cluster.uri(USER, DB)

    @property
    def env(self) -> dict[str, str]:
        return {"PGPASSWORD": self.password}

    def database(self, name: str) -> str:
        """A fresh database `name` owned by the role; its tracking URI."""
        self.cluster.ensure_database(USER, self.password, name)
        return self.cluster.uri(USER, name)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    found = bin_dir()
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and PostgreSQL's initdb/pg_ctl are missing (make test installs)")
        pytest.skip(
            "PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql)"
        )
    base = Path(tempfile.mkdtemp(prefix="ragrig-pg-"))
    base.chmod(0o755)  # the server's own user (postgres, when tests run as root) enters it
    cluster = Cluster(base / "data", free_port(), secrets.token_hex(12), bindir=found)
    password = secrets.token_hex(12)
    try:
        cluster.init(fast=True)
        cluster.start(fast=True)
        cluster.ensure_database(USER, password, DB)
        yield Postgres(cluster, password)
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(base, ignore_errors=True)
