"""A fresh PostgreSQL database per bench, so two benches running at once never share one."""

from __future__ import annotations

import os

import psycopg

PG_ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def fresh_postgres(name: str) -> str | None:
    """Drop and create database `name` and return its URL, or None when no server answers."""
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.OperationalError:
        return None
    return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
