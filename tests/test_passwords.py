"""Passwords are kept as salted scrypt hashes at the product's cost (the other tests hash
at a test's cost: tests/conftest.py `cheap_setup`)."""

from __future__ import annotations

import pytest

from charlie.config import load_settings
from charlie.home import Home
from charlie.users import authenticate, ensure_user, password_hash, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.mark.product_hashing
def test_a_password_is_kept_as_a_salted_scrypt_hash_at_the_products_cost() -> None:
    with Home.open(load_settings()) as home:
        ensure_user(home.db, "alice")
        ensure_user(home.db, "bob")
        set_password(home.db, "alice", "correct horse battery")
        set_password(home.db, "bob", "correct horse battery")
        alices, bobs = password_hash(home.db, "alice"), password_hash(home.db, "bob")
        assert alices is not None and bobs is not None
        assert alices.split("$")[:4] == ["scrypt", str(2**15), "8", "1"]
        assert "correct horse" not in alices
        assert alices != bobs  # salted: one password, two hashes
        assert authenticate(home.db, "alice", "correct horse battery") is not None
        assert authenticate(home.db, "alice", "correct horse batterY") is None
