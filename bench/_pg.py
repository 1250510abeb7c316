"""A scratch PostgreSQL database for one bench run: created on the local server, dropped after."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator, Optional

PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")


@contextmanager
def scratch_database(prefix: str) -> Iterator[Optional[str]]:
    """The URL of a new database named `prefix` and this process's id (dropped, connections and all,
    when the block ends); None, said on stdout, when PostgreSQL cannot be reached at BENCH_PG_URL."""
    try:
        import psycopg
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:
        print(f"PostgreSQL not reachable at {PG_ADMIN_URL} ({exc.__class__.__name__}); skipped")
        yield None
        return
    name = f"{prefix}_{os.getpid()}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
