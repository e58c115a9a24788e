"""Keeping the search index of notes up to date with the note files, off the request path
where it can be: the process's record of when the files were last checked (`Freshness`),
the check itself (now, or in a background thread), projects Charlie has just written a note
in (`mark_stale`), and indexing a large document in the background
(`index_in_background`). `searcher_for` gives a search (`charlie.retrieval.search`) over an
index this keeps fresh.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from charlie.config import Settings
from charlie.home import Home, Shared
from charlie.projects import Project
from charlie.retrieval.embeddings import Embedder
from charlie.retrieval.index import Index, NoteIndex, embedder_of, lock_of
from charlie.retrieval.search import Searcher

log = logging.getLogger(__name__)

INDEX_CHECK_SECONDS = 10.0

Marks = dict[int | None, tuple[Project | None, int]]


@dataclass
class Freshness:
    """What one process knows of the index against the note files, and its background work
    (in `home.shared`, which the web app shares across requests)."""

    checked_at: float | None = None  # monotonic time the last full check of the files began
    check_failed: bool = False  # the last background check raised: check in requests
    stale: Marks = field(default_factory=dict)  # project id (None: all) → (project, mark)
    marks_made: int = 0  # how many marks were made: each mark's number
    checker: threading.Thread | None = None  # the background check, once one was started
    indexers: dict[str, threading.Thread] = field(default_factory=dict)  # slug → its thread
    again: set[str] = field(default_factory=set)  # slugs written to while their indexing ran
    lock: threading.Lock = field(default_factory=threading.Lock)  # for every field above


def searcher_for(home: Home, *, max_age: float = INDEX_CHECK_SECONDS) -> Searcher:
    """A searcher over `home`'s notes, with the embedding model loaded once per process (in
    `home.shared`) and the index kept up to date with the note files.

    Checking the index against the files stats every note file (about 0.8 s at 100k notes
    on 2 cores), so it is kept off the request path where it can be:
    - the first search of a process, every search when `max_age` is 0, and the first one
      after a background check failed (so that its error reaches the person) check every
      project first; parallel requests wait for one check, not run one each;
    - a project Charlie has written a note in since (`mark_stale`) is checked first, alone,
      so the note is found at once;
    - otherwise, when the last check is older than `max_age` seconds, a thread checks the
      files in the background: this search uses the index as it is, the next ones find
      what the check found (hand edits, files added by another program).
    """
    embedder = embedder_of(home)
    index = Index(home, embedder)
    fresh = home.shared.of(Freshness)
    checked = fresh.checked_at
    if checked is None or max_age <= 0 or fresh.check_failed:
        with lock_of(home):
            checked = fresh.checked_at  # another thread may have checked meanwhile
            if checked is None or max_age <= 0 or fresh.check_failed:
                _check_all(home, index)
                return Searcher(home, index)
    if _marks(home):  # cleared only once checked: a parallel request waits for the check
        with lock_of(home):
            marked = _marks(home)
            if None in marked:
                _check_all(home, index)
            elif marked:
                index.refresh([project for project, _ in marked.values() if project is not None])
                _clear_marks(home, marked)
    if time.monotonic() - checked >= max_age:
        _check_in_background(home, embedder)
    return Searcher(home, index)


def mark_stale(home: Home, project: Project | None = None) -> None:
    """Charlie itself wrote a note (in `project`; None: anywhere): the next `searcher_for`
    re-checks that project's files before searching, so the note is found at once."""
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        fresh.marks_made += 1
        fresh.stale[None if project is None else project.id] = (project, fresh.marks_made)


def wait_for_index_check(home: Home, timeout: float | None = None) -> bool:
    """Wait for a background check of the index to end; whether none is running now."""
    thread = home.shared.of(Freshness).checker
    if thread is not None:
        thread.join(timeout)
    return thread is None or not thread.is_alive()


def index_in_background(home: Home, project: Project) -> None:
    """Index `project`'s notes in a thread with a connection and a lock of its own (as
    another process would), so that nobody's search or chat waits for it — a large
    document takes minutes to embed on a small machine. One thread a project: a note
    written while it runs is indexed by it too, straight after."""
    fresh = home.shared.of(Freshness)
    embedder = embedder_of(home)
    with fresh.lock:
        thread = fresh.indexers.get(project.slug)
        if thread is not None and thread.is_alive():
            fresh.again.add(project.slug)
            return
        thread = threading.Thread(
            target=_index_project,
            args=(home.settings, home.shared, embedder, project),
            name=f"charlie-index-{project.slug}",
            daemon=True,
        )
        fresh.indexers[project.slug] = thread
        thread.start()


def stop_background_work(home: Home, timeout: float = 30.0) -> None:
    """Ask background indexing to stop after the batch it is on, and wait a little."""
    home.shared.of(NoteIndex).stop.set()
    wait_for_indexing(home, timeout)


def indexing(home: Home) -> list[str]:
    """The projects whose notes are being indexed in the background now."""
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        return sorted(slug for slug, thread in fresh.indexers.items() if thread.is_alive())


def wait_for_indexing(home: Home, timeout: float = 60.0) -> bool:
    """Wait until no background indexing runs (tests, and `charlie` commands that exit)."""
    deadline = time.monotonic() + timeout
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        threads = list(fresh.indexers.values())
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not indexing(home)


def _index_project(
    settings: Settings, shared: Shared, embedder: Embedder, project: Project
) -> None:
    kept, fresh = shared.of(NoteIndex), shared.of(Freshness)
    while True:
        try:
            with Home.open(settings, shared=_own(kept, stop=kept.stop)) as own:
                index = Index(own, embedder)
                index.refresh([project])
                if kept.stop.is_set():
                    return  # the server stops: the files are the truth, the next check goes on
                index.vectors()
                kept.vectors = own.shared.of(NoteIndex).vectors  # the next search loads none
        except Exception:  # the next search checks the files itself, and says what failed
            log.exception("Indexing %s in the background failed", project.slug)
            fresh.check_failed = True
        with fresh.lock:
            if project.slug not in fresh.again:
                return
            fresh.again.discard(project.slug)


def _own(kept: NoteIndex, stop: threading.Event | None = None) -> Shared:
    """What a background worker's own home shares: the loaded vectors (and the server's stop,
    where it should heed it), but a lock of its own, as another process would have."""
    own = Shared()
    own.put(NoteIndex(vectors=kept.vectors, stop=stop or threading.Event()))
    return own


def _marks(home: Home) -> Marks:
    """The projects marked stale and not checked since (a copy)."""
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        return dict(fresh.stale)


def _clear_marks(home: Home, checked: Marks) -> None:
    """Forget the marks that were `checked`, but not one made again since."""
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        for key, (_, number) in checked.items():
            if key in fresh.stale and fresh.stale[key][1] == number:
                del fresh.stale[key]


def _check_all(home: Home, index: Index) -> None:
    """Check every project's files now, in this thread (the caller holds the index lock)."""
    marked = _marks(home)
    began = time.monotonic()
    index.refresh()
    _clear_marks(home, marked)
    fresh = home.shared.of(Freshness)
    fresh.checked_at, fresh.check_failed = began, False


def _check_in_background(home: Home, embedder: Embedder) -> None:
    """Start the background check, unless one is running."""
    fresh = home.shared.of(Freshness)
    with fresh.lock:
        running = fresh.checker
        if running is not None and running.is_alive():
            return
        thread = threading.Thread(
            target=_background_check,
            args=(home.settings, home.shared, embedder),
            name="charlie-index-check",
            daemon=True,  # never keeps a process alive; SQLite's transactions stay whole
        )
        fresh.checker = thread
        thread.start()


def _background_check(settings: Settings, shared: Shared, embedder: Embedder) -> None:
    """Check every project's files with a connection and a lock of its own, as another
    process would, so no search waits for it; then load the vectors if they changed, so
    the next search does not have to."""
    kept, fresh = shared.of(NoteIndex), shared.of(Freshness)
    began = time.monotonic()
    try:
        with Home.open(settings, shared=_own(kept)) as own:
            index = Index(own, embedder)
            index.refresh()
            index.vectors()  # the cached ones, unless the index has changed
            loaded = own.shared.of(NoteIndex).vectors
            if loaded is not None and index.generation == loaded[0]:
                kept.vectors = loaded
    except Exception:  # shown by the next search, which checks in its own thread
        log.exception("The background check of the search index failed")
        fresh.check_failed = True
        return
    fresh.checked_at = max(began, fresh.checked_at or began)
