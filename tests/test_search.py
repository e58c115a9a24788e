import json
import os
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project, create_project
from charlie.retrieval import usage
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index
from charlie.retrieval.search import Mode, QueryError, SearchConfig, Searcher
from charlie.users import User, ensure_user

pytestmark = pytest.mark.both_stores  # runs on PostgreSQL too (./scripts/test)

NOTES = {
    "JWT refresh tokens": (
        "We rotate the refresh_token on every use; access tokens live 15 minutes.",
        ["auth", "jwt"],
    ),
    "Password storage": (
        "Hash passwords with argon2id and never keep them in plain text.",
        ["auth", "security"],
    ),
    "Kitchen plan": ("Oak worktops, white cabinets and a tiled floor.", ["home"]),
    "Garden": ("Plant tomatoes in May; water the roses every evening.", ["home"]),
    "Holiday in Norway": ("Fly to Oslo, then take the train to Bergen.", ["travel"]),
}


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    model = LocalEmbedder()
    model.load()
    return model


@pytest.fixture
def project(home: Home) -> Project:
    made = create_project(home, "Main")
    for title, (body, tags) in NOTES.items():
        notes.create_note(made, title, body, tags)
    return made


@pytest.fixture
def index(home: Home, project: Project, embedder: LocalEmbedder) -> Index:
    built = Index(home, embedder)
    report = built.refresh()
    assert len(report.added) == len(NOTES)
    return built


@pytest.fixture
def alice(home: Home) -> User:
    return ensure_user(home.db, "alice")


def titles(searcher: Searcher, query: str, user: User, **kwargs: object) -> list[str]:
    return [h.title for h in searcher.search(query, user, **kwargs).hits]  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["vector", "keyword", "fallback", "fusion"])
def test_every_mode_finds_the_obvious_note(
    home: Home, index: Index, alice: User, mode: str
) -> None:
    found = titles(Searcher(home, index), "oak worktops in the kitchen", alice, mode=mode)
    assert found[0] == "Kitchen plan"


def test_vector_search_finds_meaning_without_shared_words(
    home: Home, index: Index, alice: User
) -> None:
    assert (
        titles(Searcher(home, index), "trip to Scandinavia by rail", alice, mode="vector")[0]
        == "Holiday in Norway"
    )


@pytest.mark.parametrize("mode", ["fusion", "vector", "fallback"])
def test_small_talk_finds_no_note_and_a_real_question_still_does(
    home: Home, index: Index, alice: User, mode: str
) -> None:
    """A note that no word of the query finds, and that is only faintly like it, is no match:
    "hello" lists nothing instead of every note at a few hundredths."""
    searcher = Searcher(home, index)
    for chat in ("hello", "thanks!", "good morning"):
        assert searcher.search(chat, alice, mode=mode).hits == [], (chat, mode)
    found = searcher.search("how should we store passwords safely", alice, mode=mode)
    assert [h.key for h in found.hits][:1] == ["main/password-storage"]
    kept = Searcher(home, index, SearchConfig(min_vector=0.0)).search("hello", alice, mode=mode)
    assert len(kept.hits) == len(NOTES)  # the floor is what leaves them out


def test_literal_forces_keyword_search_in_fallback_mode(
    home: Home, index: Index, alice: User
) -> None:
    result = Searcher(home, index).search("refresh_token", alice, mode="fallback")
    assert result.literals == ["refresh_token"]
    assert result.keyword_used
    assert result.fallback_reason == "the query has literals: refresh_token"
    top = result.hits[0]
    assert top.title == "JWT refresh tokens"
    assert top.terms[0] == "refresh_token" and top.bm25 is not None and top.bm25 > 0
    assert "refresh_token" in top.snippet


def test_confident_vector_query_does_not_fall_back(home: Home, index: Index, alice: User) -> None:
    searcher = Searcher(home, index)
    result = searcher.search(
        "oak worktops, white cabinets and a tiled floor", alice, mode="fallback"
    )
    assert result.best_cosine is not None and result.best_cosine > searcher.config.threshold
    assert not result.keyword_used and result.fallback_reason is None


def test_keyword_terms_are_few_and_meaningful(home: Home, index: Index, alice: User) -> None:
    result = Searcher(home, index).search(
        "what did we say about the tomatoes and the roses in the garden", alice, mode="keyword"
    )
    assert set(result.terms) <= {"tomatoes", "roses", "garden"} and "roses" in result.terms
    assert result.hits[0].title == "Garden"


@pytest.mark.parametrize("mode", ["vector", "keyword", "fallback", "fusion"])
@pytest.mark.parametrize("parallel", [True, False])
def test_every_mode_names_the_query_terms_it_weighed(
    home: Home, index: Index, alice: User, mode: Mode, parallel: bool
) -> None:
    config = SearchConfig(parallel=parallel)
    query = "what did we say about the tomatoes and the roses in the garden"
    result = Searcher(home, index, config).search(query, alice, mode=mode)
    assert "roses" in result.terms and "the" not in result.terms


@pytest.mark.parametrize(
    "query", ['"unbalanced', "NEAR(a b)", "a AND OR NOT", "*", "col:val", "^start", "'", "x" * 5000]
)
def test_fts_syntax_in_queries_never_breaks_search(
    home: Home, index: Index, alice: User, query: str
) -> None:
    result = Searcher(home, index).search(query, alice, mode="fusion")
    assert isinstance(result.hits, list)
    assert result.truncated == (len(query) > 2000)


def test_empty_query_is_a_clear_error(home: Home, index: Index, alice: User) -> None:
    with pytest.raises(QueryError, match="empty"):
        Searcher(home, index).search("   ", alice)


def test_search_is_limited_to_the_projects_asked(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder
) -> None:
    other = create_project(home, "Other")
    notes.create_note(other, "Oak furniture", "An oak table for the kitchen.")
    index.refresh()
    searcher = Searcher(home, index)
    only_other = searcher.search("oak kitchen", alice, [other])
    assert {h.project for h in only_other.hits} == {"other"}
    everywhere = searcher.search("oak kitchen", alice)
    assert {h.project for h in everywhere.hits} >= {"other", "main"}


def test_usage_lifts_a_note_modestly_and_only_for_its_user(
    home: Home, index: Index, alice: User
) -> None:
    bob = ensure_user(home.db, "bob")
    searcher = Searcher(home, index, SearchConfig(min_vector=0.0))  # every note listed
    query = "security of logins"
    before = {h.key: h for h in searcher.search(query, alice, mode="vector").hits}
    for _ in range(8):
        usage.record(home.db, alice.id, "view", note="main/jwt-refresh-tokens")
    after = {h.key: h for h in searcher.search(query, alice, mode="vector").hits}
    lifted = after["main/jwt-refresh-tokens"]
    assert lifted.boost > 0.5
    assert lifted.score == pytest.approx(lifted.similarity * (1 + lifted.boost * 0.3))
    assert lifted.score > before["main/jwt-refresh-tokens"].score
    assert lifted.score <= before["main/jwt-refresh-tokens"].score * 1.3 + 1e-9
    assert any("viewed 8×" in cause for cause in lifted.boost_causes)
    for_bob = {h.key: h for h in searcher.search(query, bob, mode="vector").hits}
    assert for_bob["main/jwt-refresh-tokens"].boost == 0.0


def test_hand_edits_new_files_and_deletions_are_picked_up(
    home: Home, project: Project, index: Index, alice: User
) -> None:
    folder = notes.notes_dir(project)
    (folder / "bikes.md").write_text("# Bicycles\n\nThe blue bike needs a new chain.\n")
    kitchen = folder / "kitchen-plan.md"
    kitchen.write_text(kitchen.read_text().replace("Oak", "Walnut"))
    (folder / "garden.md").unlink()
    report = index.refresh()
    assert report.added == ["main/bikes"]
    assert report.updated == ["main/kitchen-plan"]
    assert report.removed == ["main/garden"]
    searcher = Searcher(home, index)
    assert titles(searcher, "bicycle chain", alice)[0] == "Bicycles"
    assert "Garden" not in titles(searcher, "tomatoes roses", alice, limit=10)
    hit = searcher.search("walnut", alice, mode="keyword").hits[0]
    assert hit.title == "Kitchen plan"


def test_unchanged_files_are_not_read_again(home: Home, index: Index) -> None:
    assert not index.refresh().changed


def test_touched_but_identical_file_is_not_reembedded(
    home: Home, project: Project, index: Index
) -> None:
    path = notes.notes_dir(project) / "garden.md"
    os.utime(path, (1, 1))
    report = index.refresh()
    assert not report.updated and not report.added


def test_broken_note_is_reported_and_skipped(
    home: Home, project: Project, index: Index, alice: User
) -> None:
    bad = notes.notes_dir(project) / "broken.md"
    bad.write_bytes(b"---\ntitle: [oops\n---\nbody")
    report = index.refresh()
    assert [(Path(p).name, "not valid YAML" in r) for p, r in report.problems] == [
        ("broken.md", True)
    ]
    assert index.problems()[0][0] == str(bad)
    assert bad.read_bytes() == b"---\ntitle: [oops\n---\nbody"
    bad.write_text("---\ntitle: Fixed\n---\nbody about zebras")
    index.refresh()
    assert index.problems() == []
    assert titles(Searcher(home, index), "zebras", alice, mode="keyword") == ["Fixed"]


def test_indexing_never_writes_to_note_files(
    home: Home, project: Project, embedder: LocalEmbedder
) -> None:
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in notes.note_files(project)}
    Index(home, embedder).rebuild()
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in notes.note_files(project)}
    assert before == after


def test_rebuild_recovers_from_a_corrupted_index(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder
) -> None:
    index.db.execute("DROP TABLE chunks_fts")
    index.db.execute("CREATE TABLE chunks_fts (garbage)")
    home.close()  # the index file is opened afresh, as by the next request
    home = Home.open(home.settings)
    fresh = Index(home, embedder)  # notices the damage and starts over
    fresh.refresh()
    assert titles(Searcher(home, fresh), "tiled floor", alice)[0] == "Kitchen plan"
    home.close()


def test_changing_the_model_reembeds(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder
) -> None:
    class Renamed:
        name = "another-model"
        dim = embedder.dim

        def embed(self, texts: list[str]) -> object:
            return embedder.embed(texts)

    other = Index(home, Renamed())  # type: ignore[arg-type]
    report = other.refresh()
    assert report.reembedded == len(NOTES)
    assert other.model == "another-model"
    assert not other.refresh().reembedded


class Counting:
    """Another model (by name) that counts what it embeds and can crash mid-way."""

    def __init__(self, embedder: LocalEmbedder, crash_after: int | None = None) -> None:
        self.name, self.dim, self._embedder = "another-model", embedder.dim, embedder
        self.texts: list[str] = []
        self.crash_after = crash_after

    def embed(self, texts: list[str]) -> object:
        if self.crash_after is not None and len(self.texts) >= self.crash_after:
            raise RuntimeError("killed")
        self.texts += texts
        return self._embedder.embed(texts)


def test_a_reembedding_cut_short_goes_on_where_it_stopped_and_embeds_nothing_twice(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import index as index_module

    monkeypatch.setattr(index_module, "EMBED_BATCH", 2)  # one transaction per 2 chunks
    crashing = Counting(embedder, crash_after=2)
    with pytest.raises(RuntimeError, match="killed"):  # as a kill after the first batch
        Index(home, crashing).refresh()  # type: ignore[arg-type]
    assert len(crashing.texts) == 2
    assert Index(home, embedder).model == embedder.name  # the old model's name still stands

    resumed = Counting(embedder)
    other = Index(home, resumed)  # type: ignore[arg-type]
    report = other.refresh()
    assert report.reembedded == len(NOTES) - 2
    assert sorted(crashing.texts + resumed.texts) == sorted(  # every chunk exactly once
        f"{title}\n{body}" for title, (body, _) in NOTES.items()
    )
    assert other.model == "another-model" and other.state(index_module.REEMBED) is None
    assert titles(Searcher(home, other), "tiled floor", alice)[0] == "Kitchen plan"


def test_going_back_to_the_old_model_after_a_cut_short_reembedding_takes_every_chunk_back(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import index as index_module

    monkeypatch.setattr(index_module, "EMBED_BATCH", 2)
    with pytest.raises(RuntimeError, match="killed"):
        Index(home, Counting(embedder, crash_after=2)).refresh()  # type: ignore[arg-type]
    back = Index(home, embedder)  # the person goes back to the model the index was built with
    assert back.refresh().reembedded == len(NOTES)  # the 2 chunks with the other model's too
    assert back.state(index_module.REEMBED) is None and back.model == embedder.name
    fresh = {
        title: vector
        for title, vector in zip(
            NOTES,
            embedder.embed([f"{title}\n{body}" for title, (body, _) in NOTES.items()]),
            strict=True,
        )
    }
    stored = back.db.execute(
        "SELECT notes.title, chunks.vector FROM chunks JOIN notes ON notes.id = chunks.note_id"
    ).fetchall()
    for title, blob in stored:
        assert float(np.frombuffer(blob, dtype=np.float32) @ fresh[title]) > 0.98


def test_a_stopping_server_leaves_the_reembedding_for_the_next_start(
    home: Home, index: Index, embedder: LocalEmbedder
) -> None:
    from charlie.retrieval.index import NoteIndex

    stopped = Counting(embedder)
    home.shared.of(NoteIndex).stop.set()
    try:
        report = Index(home, stopped).refresh()  # type: ignore[arg-type]
    finally:
        home.shared.of(NoteIndex).stop.clear()
    assert not report.reembedded and stopped.texts == []
    assert Index(home, embedder).model == embedder.name  # not marked as re-embedded
    assert Index(home, Counting(embedder)).refresh().reembedded == len(NOTES)  # type: ignore[arg-type]


class Wider(Counting):
    """A model of another size: the packaged vectors followed by as many zeros."""

    def __init__(self, embedder: LocalEmbedder, crash_after: int | None = None) -> None:
        super().__init__(embedder, crash_after)
        self.name, self.dim = "wider-model", 2 * embedder.dim

    def embed(self, texts: list[str]) -> object:
        vectors = np.asarray(super().embed(texts))
        return np.hstack([vectors, np.zeros_like(vectors)])


def test_a_cut_short_reembedding_to_a_model_of_another_size_still_searches_and_says_so(
    home: Home, index: Index, alice: User, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charlie.retrieval import index as index_module

    monkeypatch.setattr(index_module, "EMBED_BATCH", 2)
    with pytest.raises(RuntimeError, match="killed"):  # 2 chunks of the wider size stored
        Index(home, Wider(embedder, crash_after=2)).refresh()  # type: ignore[arg-type]
    for model, searched in ((Wider(embedder), 2), (embedder, len(NOTES) - 2)):
        half = Index(home, model)  # type: ignore[arg-type]
        assert len(half.vectors().chunk_ids) == searched  # only vectors of its own size
        result = Searcher(home, half).search("tiled floor", alice)
        assert "Kitchen plan" in [hit.title for hit in result.hits]  # found by its words
        assert result.incomplete is not None
        assert f"embedded again for the model {model.name}" in result.incomplete
    done = Index(home, Wider(embedder))  # type: ignore[arg-type]
    assert done.refresh().reembedded == len(NOTES) - 2
    assert done.incomplete() is None and len(done.vectors().chunk_ids) == len(NOTES)


def test_long_notes_are_chunked(home: Home, project: Project, index: Index, alice: User) -> None:
    filler = " ".join(f"Paragraph {i} talks about ordinary things." for i in range(120))
    notes.create_note(project, "Long note", filler + "\n\nThe secret ingredient is cardamom.")
    index.refresh()
    chunks = index.db.execute(
        "SELECT count(*) FROM chunks JOIN notes ON notes.id = chunks.note_id "
        "WHERE notes.name = 'long-note'"
    ).fetchone()[0]
    assert chunks > 3
    hit = Searcher(home, index).search("secret ingredient cardamom", alice).hits[0]
    assert hit.title == "Long note" and "cardamom" in hit.snippet


@pytest.mark.sqlite_only
def test_the_index_lives_in_its_own_sqlite_file_not_beside_the_notes(
    home: Home, index: Index
) -> None:
    assert home.index_path == home.settings.db_path.with_name("index.db")
    db = sqlite3.connect(home.index_path)
    assert db.execute("SELECT count(*) FROM notes").fetchone()[0] == len(NOTES)
    db.close()
    tables = {row[0] for row in home.db.execute("SELECT name FROM sqlite_master")}
    assert not tables & {"notes", "chunks", "chunks_fts", "index_state"}  # not in charlie.db
    assert json.loads(json.dumps(index.stats()))["model"].startswith("all-MiniLM-L6-v2")


def test_a_project_search_uses_only_that_projects_vectors_and_agrees_with_all(
    home: Home, project: Project, embedder: LocalEmbedder, alice: User
) -> None:
    other = create_project(home, "Other")
    notes.create_note(other, "Oslo trip", "Fly to Oslo and take the train to Bergen.", ["travel"])
    notes.create_note(other, "Oven", "The oven runs hot; bake bread at 220 degrees.", ["home"])
    third = create_project(home, "Empty")
    index = Index(home, embedder)
    index.refresh()
    vectors = index.vectors()
    for made in (project, other):  # each project's rows are one slice, and only its own
        start, end = vectors.spans[made.id]
        assert set(vectors.project_ids[start:end]) == {made.id}
    assert third.id not in vectors.spans
    searcher = Searcher(home, index)
    query = "train journey to Bergen"
    everywhere = searcher.search(query, alice, mode="vector").hits
    only = searcher.search(query, alice, [other], mode="vector").hits
    assert {h.project for h in only} == {"other"}
    same_project = [h for h in everywhere if h.project == "other"]
    assert [h.title for h in only] == [h.title for h in same_project]
    assert [h.score for h in only] == pytest.approx([h.score for h in same_project], abs=1e-6)
    assert searcher.search(query, alice, [third], mode="vector").hits == []


def test_a_keyword_search_in_a_project_matches_only_there_and_never_the_scope(
    home: Home, project: Project, embedder: LocalEmbedder, alice: User
) -> None:
    other = create_project(home, "Other")
    notes.create_note(other, "Refresh rota", "Whose turn to refresh the guest room.", ["home"])
    index = Index(home, embedder)
    index.refresh()
    searcher = Searcher(home, index)
    both = titles(searcher, "refresh", alice, mode="keyword")
    assert set(both) == {"JWT refresh tokens", "Refresh rota"}
    assert titles(searcher, "refresh", alice, projects=[other], mode="keyword") == ["Refresh rota"]
    assert titles(searcher, "refresh", alice, projects=[project], mode="keyword") == [
        "JWT refresh tokens"
    ]
    token = f"p{other.id}"  # how the scope is stored: never found as a word of a note
    assert titles(searcher, token, alice, mode="keyword") == []
    assert searcher.idf(token) == 0.0


def test_common_terms_add_to_the_score_but_do_not_widen_the_keyword_search(
    home: Home, project: Project, embedder: LocalEmbedder, alice: User
) -> None:
    for i in range(6):
        notes.create_note(project, f"Garden bed {i}", f"Garden bed {i} gets compost.", ["home"])
    index = Index(home, embedder)
    index.refresh()
    every = Searcher(home, index, SearchConfig(common_share=1.0))
    split = Searcher(home, index, SearchConfig(common_share=0.3, common_min_chunks=0))
    assert split.common(["garden", "roses"]) == ["garden"]
    assert split.common(["garden", "compost"]) == ["garden"]  # the rarest is never common
    assert split.common(["garden"]) == [] and every.common(["garden", "roses"]) == []
    wide = every.search("garden roses", alice, mode="keyword", explain=False).hits
    narrow = split.search("garden roses", alice, mode="keyword", explain=False).hits
    assert len(wide) == 7 and wide[0].title == "Garden"  # every note with "garden"
    assert [h.title for h in narrow] == ["Garden"]  # only those with "roses" are ranked,
    assert narrow[0].bm25 == pytest.approx(wide[0].bm25)  # each scored on every term
    in_project = split.search("garden roses", alice, [project], mode="keyword").hits
    assert [h.title for h in in_project] == ["Garden"]
    assert sorted(in_project[0].terms) == ["garden", "roses"]  # both shown as matched


def test_fusion_runs_the_keyword_side_beside_the_vectors_with_the_same_results(
    home: Home, index: Index, alice: User
) -> None:
    one_by_one = Searcher(home, index, SearchConfig(parallel=False))
    beside = Searcher(home, index)
    assert beside.config.parallel
    for query in ("oak worktops", "JWT refresh_token rotation", "train to Bergen"):
        a, b = one_by_one.search(query, alice), beside.search(query, alice)
        assert [(h.key, h.score, h.vector, h.bm25, h.snippet) for h in a.hits] == [
            (h.key, h.score, h.vector, h.bm25, h.snippet) for h in b.hits
        ]


def test_a_failure_of_the_keyword_side_in_its_thread_reaches_the_caller(
    home: Home, index: Index, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    searcher = Searcher(home, index)

    def broken(*args: object) -> dict[int, tuple[float, int]]:
        raise QueryError("the keyword side broke")

    monkeypatch.setattr(searcher, "_keyword_side", broken)
    threads = threading.active_count()
    with pytest.raises(QueryError, match="keyword side broke"):
        searcher.search("oak worktops", alice)
    assert threading.active_count() == threads  # nothing left running
    assert searcher.search("oak worktops", alice, mode="vector").hits[0].title == "Kitchen plan"


def test_candidates_that_cannot_reach_the_top_are_left_out_without_changing_it(
    home: Home, index: Index, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    searcher = Searcher(home, index, SearchConfig(min_vector=0.0))
    for _ in range(30):  # the least similar note gets the largest boost there is
        usage.record(home.db, alice.id, "view", note="main/holiday-in-norway")
    seen: list[tuple[int, int]] = []
    real = Searcher._contenders

    def counted(self: Searcher, similarity: dict[int, float], limit: int) -> list[int]:
        kept = real(self, similarity, limit)
        seen.append((len(kept), len(similarity)))
        return kept

    monkeypatch.setattr(Searcher, "_contenders", counted)
    queries = ["security of logins", "garden roses", "kitchen floor", "train to Bergen"]
    ranked = {
        (q, n): [(h.key, h.score) for h in searcher.search(q, alice, limit=n).hits]
        for q in queries
        for n in (1, 2, 4)
    }
    assert any(kept < total for kept, total in seen)  # some were left out
    monkeypatch.setattr(Searcher, "_contenders", lambda self, similarity, limit: list(similarity))
    for (q, n), hits in ranked.items():  # and every candidate ranked gives the same
        again = searcher.search(q, alice, limit=n).hits  # the boosts fade a little meanwhile
        assert [h.key for h in again] == [key for key, _ in hits]
        assert [h.score for h in again] == pytest.approx([score for _, score in hits])
