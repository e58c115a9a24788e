"""A call run in a thread beside the caller's work: the search's keyword side, say, while
the caller embeds the query and multiplies vectors (SQLite, onnxruntime and numpy all let go
of the GIL, so the two really overlap on two cores)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Deferred(Generic[T]):
    """`call()`, run in a thread of its own from the start when `parallel`, else in the
    caller's thread when its result is first asked for. Leaving the `with` block waits for
    the thread, so nothing runs on after a search has failed."""

    def __init__(self, call: Callable[[], T], parallel: bool) -> None:
        self._call = call
        self._value: T | None = None
        self._error: Exception | None = None
        self._parallel = parallel
        self._thread = threading.Thread(target=self._run, name="charlie-search", daemon=True)
        if parallel:
            self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except Exception as exc:  # raised again in the caller's thread by `result`
            self._error = exc

    def result(self) -> T:
        if not self._parallel:
            return self._call()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return cast(T, self._value)

    def __enter__(self) -> Deferred[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._parallel:
            self._thread.join()
