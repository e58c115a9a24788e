"""Storage failures as the real parts raise them."""

from __future__ import annotations

import sqlite3


def sqlite_full() -> sqlite3.Error:
    """A real SQLITE_FULL error, as SQLite raises it when the disk has no room."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (b BLOB)")
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("SQLite found room where there was none")
