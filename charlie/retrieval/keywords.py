"""Keywords: the meaningful terms of a text, the literals of a query, and safe FTS5 queries.

A *term* is a lower-cased word, kept whole when it is hyphenated, dotted or an identifier
(`interleukin-2`, `h2a.z`, `refresh_token`), so it keeps its meaning. Terms are matched
against the SQLite FTS5 index as quoted strings: FTS5 runs a quoted string through the
table's own tokenizer and matches the pieces as a phrase, so the query side and the index
side always agree. With the index's `porter unicode61` tokenizer, `"interleukin-2"` matches
"Interleukin-2", "interleukin 2" and "interleukin-2's"; `"refresh_token"` matches
"refresh_token" and "refresh token"; `"jwt"` matches "JWTs".

Stop words come from the English list of stopwords-iso (package `stopwordsiso`, MIT): about
1,300 words, the big list the design asks for. An acronym written in capitals (`US`, `MS`,
`ER`) is kept even when its lower-case form is a stop word.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

FTS5_TOKENIZE = "porter unicode61 remove_diacritics 2"
"""The FTS5 `tokenize=` option these terms are made for (stemmed, accent-folded)."""

_TERM = re.compile(r"\w+(?:[-.'’]\w+)*")
_JOINERS = re.compile(r"[-.'’_]+")
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|`([^`]+)`|(?<!\w)\'([^\']+)\'(?!\w)')
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]*[A-Z][A-Z0-9]*s?")  # JWT, HIV, BRCA1, CD4, JWTs
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")  # camelCase, PascalCase, XMLHttp
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")


@functools.cache
def stop_words(language: str = "en") -> frozenset[str]:
    """The stop words of `language` (an ISO 639-1 code), lower-cased."""
    import stopwordsiso

    words = stopwordsiso.stopwords(language)
    if not words:
        raise ValueError(f"no stop-word list for language {language!r}")
    return frozenset(word.lower().replace("’", "'") for word in words)


def tokenize(text: str) -> list[str]:
    """Every word of `text`, lower-cased, in order, compounds kept whole, nothing dropped.

    Possessive "'s" is cut (`Alzheimer's` → `alzheimer`), and so are the underscores around
    an identifier (`__init__` → `init`), as FTS5 would drop them.
    """
    return [_normalize(match.group()) for match in _TERM.finditer(text)]


def terms(text: str, language: str = "en") -> list[str]:
    """The meaningful terms of `text`: unique, in order of first appearance.

    Dropped: stop words (unless written as a capitalised acronym) and one-character words.
    """
    stops = stop_words(language)
    seen: set[str] = set()
    out: list[str] = []
    for match in _TERM.finditer(text):
        raw = match.group()
        term = _normalize(raw)
        if term in seen or len(term) < 2:
            continue
        if _is_stop_word(term, stops) and not _ACRONYM.fullmatch(raw):
            continue
        seen.add(term)
        out.append(term)
    return out


def with_parts(items: Iterable[str], language: str = "en") -> list[str]:
    """`items`, then the meaningful pieces of each compound among them, without repeats.

    `interleukin-2` adds `interleukin`, `h2a.z` adds `h2a`, `refresh_token` adds `refresh`
    and `token`: a note that writes only a piece still matches, and one with the whole
    compound still ranks higher, as it matches both. On SciFact this lifts keyword nDCG@10
    by about half a point (benchmarks/scifact.py).
    """
    stops = stop_words(language)
    out = list(dict.fromkeys(items))
    seen = set(out)
    for item in list(out):
        for piece in _JOINERS.split(item):
            if len(piece) > 1 and piece not in stops and piece not in seen:
                seen.add(piece)
                out.append(piece)
    return out


def top_terms(
    text: str,
    idf: Callable[[str], float] | Mapping[str, float],
    k: int = 12,
    language: str = "en",
) -> list[str]:
    """The `k` terms of `text` with the highest IDF, best first (ties keep text order).

    `idf` gives a term's inverse document frequency in the collection searched: a mapping
    (a term missing from it never occurs there: IDF 0) or a function. Terms with IDF 0 or
    less are dropped, since a term that matches nothing cannot help a keyword search.
    For an FTS5 index, an exact IDF is one count per term:
    `SELECT count(*) FROM t WHERE t MATCH match_expression([term])`.

    On SciFact (claims of ~12 words) k=12 ranks as well as all terms; k=8 loses 0.6 point
    and k=4 loses 3.7 points of nDCG@10, so k mostly guards against long, chatty queries.
    """
    lookup = (lambda term: idf.get(term, 0.0)) if isinstance(idf, Mapping) else idf
    scored = [(lookup(term), position, term) for position, term in enumerate(terms(text, language))]
    ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    return [term for _, _, term in ranked[:k]]


class LiteralTerm(NamedTuple):
    """Something in a query that must be matched as written, with what kind of thing it is."""

    text: str
    kind: str  # "phrase" (quoted), "acronym", "identifier" or "code"


def literals(query: str) -> list[LiteralTerm]:
    """The literals of `query`, in order: quoted phrases, acronyms, identifiers, codes.

    - phrase: text in double, typographic or back quotes, or in single quotes around words;
    - acronym: two capitals or more, digits allowed (`JWT`, `HIV`, `BRCA1`, `JWTs`);
    - identifier: `snake_case`, `camelCase`, `PascalCase`;
    - code: a word mixing letters and digits (`p53`, `H2O`), or one joined by `-` or `.`
      that holds a digit or a capital (`interleukin-2`, `H2A.Z`, `COVID-19`), or a dotted
      name (`config.toml`); plain hyphenated words (`long-term`) and `e.g.` are not.
    """
    found: list[LiteralTerm] = []
    seen: set[str] = set()

    def add(text: str, kind: str) -> None:
        if text and text.lower() not in seen:
            seen.add(text.lower())
            found.append(LiteralTerm(text, kind))

    rest = query
    for match in _QUOTED.finditer(query):
        add(next(group for group in match.groups() if group is not None).strip(), "phrase")
        rest = rest.replace(match.group(), " ")
    for match in _TERM.finditer(rest):
        word = match.group()
        kind = _literal_kind(word)
        if kind:
            add(word, kind)
    return found


def match_expression(items: Iterable[str]) -> str | None:
    """An FTS5 MATCH expression that matches any of `items` (OR), or None when empty.

    Every item is quoted as an FTS5 string (inner `"` doubled), so nothing a person types
    (`"`, `*`, `^`, `:`, parentheses, `NEAR`, `AND`, `NOT`…) is read as query syntax: each
    item becomes a phrase of the words the table's tokenizer finds in it.
    """
    quoted = ['"' + text.replace('"', '""') + '"' for text in phrases(items)]
    return " OR ".join(quoted) if quoted else None


def phrases(items: Iterable[str]) -> list[str]:
    """The distinct phrases `match_expression` makes of `items`, in order (NULs as spaces,
    trimmed, empty ones left out)."""
    return list(dict.fromkeys(t for t in (i.replace("\x00", " ").strip() for i in items) if t))


def _normalize(word: str) -> str:
    term = word.lower().replace("’", "'")
    if term.endswith("'s"):
        term = term[:-2]
    return term.strip("_") or term


def _is_stop_word(term: str, stops: frozenset[str]) -> bool:
    return term in stops or ("." in term and term.replace(".", "") in stops)


def _literal_kind(word: str) -> str | None:
    pieces = re.split(r"[-.'’]", word)  # underscores are handled below
    if len(pieces) > 1:
        if "'" in word or "’" in word:
            return None  # a contraction or possessive: don't, Alzheimer's
        if _DIGIT.search(word) or any(c.isupper() for c in word):
            return "code"
        if "." in word and all(len(piece) > 1 for piece in pieces):
            return "code"  # a dotted name: config.toml, charlie.search
        return "identifier" if "_" in word else None
    if "_" in word:
        return "identifier"
    if _ACRONYM.fullmatch(word):
        return "acronym"
    if _CAMEL.search(word):
        return "identifier"
    if _DIGIT.search(word) and _LETTER.search(word):
        return "code"
    return None
