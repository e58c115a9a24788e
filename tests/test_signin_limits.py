"""Sign-in limiting against a real server on loopback, configured as `charlie serve` is."""

from __future__ import annotations

import threading
from collections import Counter

import httpx
import pytest
from live_server import live_server
from web_support import PASSWORD

from charlie.config import load_settings
from charlie.home import Home
from charlie.household import signin
from charlie.household.signin import MAX_ADDRESS_FAILURES, MAX_FAILURES
from charlie.users import ensure_user, set_password

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)


@pytest.fixture(autouse=True)
def accounts() -> None:
    with Home.open(load_settings()) as home:
        for name in ("alice", "bob"):
            ensure_user(home.db, name)
            set_password(home.db, name, PASSWORD)


@pytest.fixture
def strict_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """The address limit as low as the name limit, so a handful of guesses reach it."""
    monkeypatch.setattr(signin, "MAX_ADDRESS_FAILURES", MAX_FAILURES)


def guess(url: str, name: str, password: str = "wrong password", **headers: str) -> int:
    answer = httpx.post(
        f"{url}/api/login", json={"name": name, "password": password}, headers=headers, timeout=60
    )
    return answer.status_code


def test_sixty_concurrent_guesses_get_at_most_the_limit_checked() -> None:
    with live_server() as url:
        start = threading.Barrier(60)
        statuses: list[int] = []

        def one() -> None:
            start.wait()
            statuses.append(guess(url, "alice"))

        threads = [threading.Thread(target=one) for _ in range(60)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    counted = Counter(statuses)
    assert counted[401] == MAX_FAILURES  # checked (and wrong)
    assert counted[429] == 60 - MAX_FAILURES  # refused before any password check


def test_rotating_x_forwarded_for_does_not_reset_the_address_limit(strict_address: None) -> None:
    with live_server() as url:
        names = [f"nobody{n}" for n in range(MAX_FAILURES + 3)]  # a new name every time
        statuses = [
            guess(url, name, **{"X-Forwarded-For": f"10.0.0.{n}"}) for n, name in enumerate(names)
        ]
    assert statuses == [401] * MAX_FAILURES + [429] * 3


def test_a_trusted_proxy_is_believed(monkeypatch: pytest.MonkeyPatch, strict_address: None) -> None:
    monkeypatch.setenv("CHARLIE_TRUSTED_PROXIES", "127.0.0.1")
    with live_server() as url:
        first = [guess(url, f"a{n}", **{"X-Forwarded-For": "10.0.0.1"}) for n in range(6)]
        other = guess(url, "b0", **{"X-Forwarded-For": "10.0.0.2"})
    assert first == [401] * MAX_FAILURES + [429]
    assert other == 401  # another client behind the proxy is not locked out


def test_a_stranger_cannot_lock_the_owner_out_of_a_known_device(strict_address: None) -> None:
    with live_server() as url, httpx.Client(base_url=url, timeout=60) as owner:
        assert owner.post("/api/login", json={"name": "alice", "password": PASSWORD}).is_success
        assert owner.cookies.get("charlie_device")

        stranger = [guess(url, "alice") for _ in range(MAX_FAILURES + 1)]
        assert stranger == [401] * MAX_FAILURES + [429]
        assert guess(url, "alice", PASSWORD) == 429  # the name is locked for unknown devices

        again = owner.post("/api/login", json={"name": "alice", "password": PASSWORD})
        assert again.status_code == 200, again.text

        # A known device has its own limit: guessing from it is no way round.
        wrong = [
            owner.post("/api/login", json={"name": "alice", "password": "nope nope"}).status_code
            for _ in range(MAX_FAILURES + 1)
        ]
        assert wrong == [401] * MAX_FAILURES + [429]
        # A device token is alice's alone: for bob it is an unknown browser at an address
        # the stranger has used up.
        theirs = owner.post("/api/login", json={"name": "bob", "password": PASSWORD})
        assert theirs.status_code == 429


def test_a_device_token_dies_with_a_password_change() -> None:
    with live_server() as url, httpx.Client(base_url=url, timeout=60) as owner:
        assert owner.post("/api/login", json={"name": "alice", "password": PASSWORD}).is_success
        with Home.open(load_settings()) as home:
            set_password(home.db, "alice", "a new password")
        for _ in range(MAX_FAILURES):
            assert guess(url, "alice") == 401
        answer = owner.post("/api/login", json={"name": "alice", "password": "a new password"})
        assert answer.status_code == 429  # the old device token is no longer known


def test_a_household_signing_in_at_once_from_one_address_is_let_in() -> None:
    names = [f"member{n}" for n in range(12)]
    with Home.open(load_settings()) as home:
        for name in names:
            ensure_user(home.db, name)
            set_password(home.db, name, PASSWORD)
    assert len(names) < MAX_ADDRESS_FAILURES
    with live_server() as url:
        start = threading.Barrier(len(names))
        statuses: list[int] = []

        def one(name: str) -> None:
            start.wait()
            statuses.append(guess(url, name, PASSWORD))

        threads = [threading.Thread(target=one, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert statuses == [200] * len(names)
