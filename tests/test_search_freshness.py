"""The index's check against the note files, kept off the request path (`searcher_for`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project, create_project
from charlie.retrieval.embeddings import EmbeddingError, LocalEmbedder
from charlie.retrieval.index import NoteIndex
from charlie.retrieval.upkeep import (
    Freshness,
    mark_stale,
    searcher_for,
    wait_for_index_check,
)
from charlie.users import User, ensure_user


class GatedEmbedder:
    """The real model, except that embedding a text holding `gate_word` waits for `opened`
    (or raises, when `fail` is set): a background check can be held mid-way."""

    def __init__(self, model: LocalEmbedder, gate_word: str) -> None:
        self.model = model
        self.gate_word = gate_word
        self.opened = threading.Event()
        self.fail = False
        self.name, self.dim = model.name, model.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(self.gate_word in text for text in texts):
            if self.fail:
                raise EmbeddingError("the model is gone")
            assert self.opened.wait(30), "the test never opened the gate"
        return self.model.embed(texts)


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    loaded = LocalEmbedder()
    loaded.load()
    return loaded


@pytest.fixture
def gated(home: Home, model: LocalEmbedder) -> GatedEmbedder:
    embedder = GatedEmbedder(model, "bicycle")
    home.shared.of(NoteIndex).embedder = embedder
    return embedder


@pytest.fixture
def project(home: Home) -> Project:
    made = create_project(home, "Main")
    notes.create_note(made, "Kitchen plan", "Oak worktops and white cabinets.", ["home"])
    notes.create_note(made, "Garden", "Plant tomatoes in May; water the roses.", ["home"])
    return made


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


def titles(home: Home, query: str, user: User, max_age: float) -> list[str]:
    result = searcher_for(home, max_age=max_age).search(query, user, mode="keyword")
    return [hit.title for hit in result.hits]


def write_by_hand(project: Project) -> None:
    notes.notes_dir(project).mkdir(exist_ok=True)
    (notes.notes_dir(project) / "bikes.md").write_text(
        "# Bicycles\n\nThe blue bicycle needs a new chain.\n"
    )


def test_the_first_search_of_a_process_checks_the_files_first(
    home: Home, project: Project, gated: GatedEmbedder, alice: User
) -> None:
    gated.opened.set()
    write_by_hand(project)
    assert titles(home, "bicycle chain", alice, max_age=60) == ["Bicycles"]
    assert home.shared.of(Freshness).checker is None  # checked in the request, no thread


def test_a_due_check_runs_in_the_background_and_no_search_waits_for_it(
    home: Home, project: Project, gated: GatedEmbedder, alice: User
) -> None:
    gated.opened.set()
    assert titles(home, "oak", alice, max_age=60) == ["Kitchen plan"]
    gated.opened.clear()
    write_by_hand(project)
    assert titles(home, "bicycle", alice, max_age=60) == []  # not due: no check at all
    assert home.shared.of(Freshness).checker is None
    home.shared.of(Freshness).checked_at -= 120  # the last check is two minutes old
    # The check starts, and is held while it embeds the new note; the search goes on.
    assert titles(home, "bicycle", alice, max_age=60) == []
    checker = home.shared.of(Freshness).checker
    assert checker.is_alive() and checker.daemon
    assert not wait_for_index_check(home, timeout=0.2)
    gated.opened.set()
    assert wait_for_index_check(home, timeout=30)
    # Its vectors were loaded by the check: the next search finds the note, loads nothing.
    loaded = home.shared.of(NoteIndex).vectors
    assert titles(home, "bicycle", alice, max_age=60) == ["Bicycles"]
    assert home.shared.of(NoteIndex).vectors is loaded
    assert home.shared.of(Freshness).checker is checker  # not started again: the check is recent


def test_a_note_charlie_writes_is_found_at_once_without_checking_everything(
    home: Home, project: Project, gated: GatedEmbedder, alice: User
) -> None:
    gated.opened.set()
    other = create_project(home, "Other")
    assert titles(home, "oak", alice, max_age=60) == ["Kitchen plan"]
    write_by_hand(other)  # by hand, in another project: not marked
    made = notes.create_note(project, "Bicycle shed", "A shed for the bicycle.", [])
    mark_stale(home, project)
    assert titles(home, "bicycle", alice, max_age=60) == [made.title]
    mark_stale(home)  # somewhere: everything is checked
    assert sorted(titles(home, "bicycle", alice, max_age=60)) == ["Bicycle shed", "Bicycles"]
    assert home.shared.of(Freshness).checker is None


def test_max_age_zero_checks_in_every_request(
    home: Home, project: Project, gated: GatedEmbedder, alice: User
) -> None:
    gated.opened.set()
    assert titles(home, "bicycle", alice, max_age=0) == []
    write_by_hand(project)
    assert titles(home, "bicycle", alice, max_age=0) == ["Bicycles"]
    assert home.shared.of(Freshness).checker is None


def test_a_failed_background_check_is_run_again_in_the_next_request_to_show_its_error(
    home: Home,
    project: Project,
    gated: GatedEmbedder,
    alice: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gated.opened.set()
    assert titles(home, "oak", alice, max_age=60) == ["Kitchen plan"]
    write_by_hand(project)
    gated.fail = True
    home.shared.of(Freshness).checked_at -= 120
    assert titles(home, "oak", alice, max_age=60) == ["Kitchen plan"]  # not held up
    assert wait_for_index_check(home, timeout=30)
    assert "background check of the search index failed" in caplog.text
    with pytest.raises(EmbeddingError, match="the model is gone"):
        searcher_for(home, max_age=60)
    gated.fail = False
    assert titles(home, "bicycle", alice, max_age=60) == ["Bicycles"]
