"""The keyword side from posting lists in memory: the same BM25 as FTS5's bm25(), kept in step
with the notes, and filled in for an index file from before the words were kept."""

import random

import numpy as np
import pytest

from charlie.home import Home
from charlie.notes import files as notes
from charlie.projects import Project, create_project
from charlie.retrieval import index_file
from charlie.retrieval.embeddings import LocalEmbedder
from charlie.retrieval.index import Index, NoteIndex
from charlie.retrieval.postings import PAIR, tokenizer
from charlie.retrieval.search import SearchConfig, Searcher

COMMON = ["garden", "roses", "compost", "tomato", "oak", "kitchen", "oslo", "token", "refresh"]
SYLLABLES = ["ka", "lo", "mi", "ren", "tus", "vo", "zan", "pel", "dor", "qui"]
RARE = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "n", "st")]
WORDS = COMMON + RARE


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    model = LocalEmbedder()
    model.load()
    return model


def fill(home: Home, count: int = 60, seed: int = 7) -> list[Project]:
    """Projects of notes drawn from a small vocabulary, some long enough for several chunks,
    some with the words in the title, some with `refresh_token` (a phrase)."""
    rng = random.Random(seed)
    projects = [create_project(home, name) for name in ("Main", "Side", "Third")]
    for i in range(count):
        words = rng.choices(COMMON, k=3) + rng.choices(RARE, k=rng.choice([5, 12, 40, 260]))
        if i % 7 == 0:
            words.append("refresh_token")
        title = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}"
        notes.create_note(projects[i % 3], title, " ".join(words), [])
    return projects


def queries(seed: int = 3) -> list[list[str]]:
    rng = random.Random(seed)
    made = [rng.sample(COMMON, rng.randint(0, 2)) + rng.sample(RARE, 3) for _ in range(40)]
    made += [["refresh_token", "refresh", "token"], ["gardens", "ROSES"], ["nowhere", "oak"]]
    made += [["p1"], ["don't", "oak"], ["—"], ["tomato", "tomato"]]
    return made


def same(new: dict[int, tuple[float, int]], old: dict[int, tuple[float, int]]) -> None:
    """The two keyword sides agree: the same scores, best first, on the same notes (a tie
    may order two notes either way)."""
    assert sorted(v[0] for v in new.values()) == pytest.approx(sorted(v[0] for v in old.values()))
    assert {n: round(v[0], 9) for n, v in new.items()} == {
        n: round(v[0], 9) for n, v in old.items()
    }


SPLIT = SearchConfig(common_share=0.3, common_min_chunks=0, title_weight=3.5)


@pytest.mark.parametrize("config", [SearchConfig(), SPLIT], ids=["shipped", "common-terms"])
def test_the_posting_lists_rank_exactly_as_fts5_bm25(
    home: Home, embedder: LocalEmbedder, config: SearchConfig
) -> None:
    projects = fill(home)
    index = Index(home, embedder)
    index.refresh()
    searcher = Searcher(home, index, config)
    assert index.postings() is not None
    compared = 0
    for terms in queries():
        for scope in ([], [projects[1].id], [projects[0].id, projects[2].id]):
            new = searcher._keyword_side(terms, scope)
            same(new, searcher._keyword_side_fts(terms, scope))
            compared += bool(new)
    assert compared > 60  # most queries find something: the comparison is not of nothing


def test_the_words_are_cut_as_fts5_cuts_them() -> None:
    assert tokenizer().items(["Gardens", "refresh_token", "—", "don't", "café"]) == [
        ("garden",),
        ("refresh", "token"),
        (),
        ("don", "t"),
        ("cafe",),
    ]
    lengths, words = tokenizer().chunks(
        [(5, "Roses", "roses and more roses", "p3"), (9, "", "", "p3")]
    )
    assert lengths == {5: 6, 9: 1}  # every token, the scope's included, as FTS5's row length
    assert sorted(words) == [(5, "and", 0, 1), (5, "more", 0, 1), (5, "rose", 1, 2)]


def test_edits_and_deletions_reach_the_posting_lists(home: Home, embedder: LocalEmbedder) -> None:
    project = create_project(home, "Main")
    garden = notes.create_note(project, "Garden", "Plant tomatoes in May.", [])
    notes.create_note(project, "Kitchen", "Oak worktops.", [])
    index = Index(home, embedder)
    index.refresh()
    searcher = Searcher(home, index)
    assert len(searcher._keyword_side(["tomatoes"], [])) == 1
    garden.path.unlink()
    notes.create_note(project, "Balcony", "Tomatoes in pots.", [])
    index.refresh()
    found = searcher._keyword_side(["tomatoes"], [])
    titles = {
        index.db.execute("SELECT title FROM notes WHERE id = ?", (n,)).fetchone()[0] for n in found
    }
    assert titles == {"Balcony"}
    kept = index.db.execute("SELECT count(*) FROM chunk_terms").fetchone()[0]
    assert kept == index.db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    pairs = index.db.execute("SELECT pairs FROM chunk_terms").fetchall()
    assert all(len(p[0]) % PAIR.itemsize == 0 for p in pairs)


def test_an_index_file_from_before_the_words_were_kept_gets_them_without_embedding(
    home: Home, embedder: LocalEmbedder
) -> None:
    projects = fill(home, count=30)
    index = Index(home, embedder)
    index.refresh()
    searcher = Searcher(home, index)
    before = {tuple(t): searcher._keyword_side(t, []) for t in queries()}
    path = index.db.execute("PRAGMA database_list").fetchone()[2]
    index.db.executescript("DROP TABLE chunk_terms; DROP TABLE terms;")
    home.shared.of(NoteIndex).postings = None

    class Refusing(LocalEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            if texts:
                raise AssertionError("nothing is to be embedded again")
            return super().embed(texts)

    older = index_file.open_index_file(path)
    assert older.execute("SELECT count(*) FROM chunk_terms").fetchone()[0] == 0
    assert older.execute("SELECT value FROM index_state WHERE key = 'unworded'").fetchone()
    older.close()
    again = Index(home, Refusing())
    searcher = Searcher(home, again)
    assert again.postings() is None  # until the refresh keeps the words: FTS5 ranks
    for terms in queries():
        same(searcher._keyword_side(terms, []), before[tuple(terms)])
    again.refresh()
    assert again.state("unworded") is None
    assert again.postings() is not None
    for terms in queries():
        same(searcher._keyword_side(terms, []), before[tuple(terms)])
    assert projects  # the notes stay as they were


def test_a_chunk_without_its_words_leaves_the_ranking_to_fts5(
    home: Home, embedder: LocalEmbedder
) -> None:
    fill(home, count=12)
    index = Index(home, embedder)
    index.refresh()
    index.db.execute("DELETE FROM chunk_terms WHERE chunk_id = (SELECT min(id) FROM chunks)")
    index._bump()
    assert index.postings() is None
    searcher = Searcher(home, index)
    assert searcher._keyword_side(["garden"], []) == searcher._keyword_side_fts(["garden"], [])


def test_a_lost_word_table_is_filled_again_and_nothing_ranks_on_stale_ids(
    home: Home, embedder: LocalEmbedder
) -> None:
    fill(home, count=20)
    index = Index(home, embedder)
    index.refresh()
    searcher = Searcher(home, index)
    before = {tuple(t): searcher._keyword_side(t, []) for t in queries()}
    path = index.db.execute("PRAGMA database_list").fetchone()[2]
    index.db.execute("DROP TABLE terms")  # the words kept name their terms by these ids
    db = index_file.open_index_file(path)
    assert db.execute("SELECT count(*) FROM chunk_terms").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0  # no rebuild
    db.close()
    index._bump()
    assert index.postings() is None
    index.refresh()
    assert index.postings() is not None
    for terms in queries():
        same(searcher._keyword_side(terms, []), before[tuple(terms)])


def test_idf_is_fts5s_with_its_floor(home: Home, embedder: LocalEmbedder) -> None:
    project = create_project(home, "Main")
    for title, body in (("One", "alpha beta"), ("Two", "alpha gamma"), ("Three", "beta")):
        notes.create_note(project, title, body, [])
    index = Index(home, embedder)
    index.refresh()
    lists = index.postings()
    assert lists is not None and lists.total == 3
    assert lists.idf(2) == 1e-6  # in two rows of three: log(1.5 / 2.5) < 0, FTS5's floor
    assert lists.idf(1) == pytest.approx(np.log(2.5 / 1.5))


def test_records_are_ordered_by_word_then_chunk_past_16_bit_word_ids() -> None:
    from charlie.retrieval.postings import _by_term

    rng = np.random.default_rng(1)
    for top in (50, 70_000, 3_000_000_000):
        terms = rng.integers(0, top, 5_000).astype(np.uint32)
        order = _by_term(terms)
        assert np.array_equal(order, np.argsort(terms, kind="stable"))
