"""What the API answers, as Pydantic models: the response models of the routes, so
`/api/docs` (and `/api/openapi.json`) show every field of every answer.

Each model forbids keys it does not declare: an answer that grows a field the model does
not name fails (500) instead of losing it quietly, so the tests catch a model that fell
behind its route. The routes answer with these models, built in `shapes.py` and beside
each route.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from charlie.retrieval.search import PublicHit
from charlie.trace import By, Guard, ToolMode
from charlie.voice.tts import EngineState


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(Out):
    """A file Charlie could not read, and why."""

    path: str
    reason: str


class ProjectOut(Out):
    slug: str
    name: str
    style: str
    persona: str
    distill_every: int
    quotes_window: int | None
    write_tools: list[str] | None
    model: str | None  # None: the server's default


class ProjectList(Out):
    projects: list[ProjectOut]
    problems: list[Problem]


class NoteOut(Out):
    id: str  # "project/name"
    project: str
    name: str
    title: str
    tags: list[str]
    updated: str


Scalar = str | int | float | bool
MetaValue = Scalar | list[Scalar]


class NoteFull(NoteOut):
    body: str
    html: str  # safe HTML, drawn as replies are
    sha256: str  # the version: send it back as a PUT's base_sha256
    meta: dict[str, MetaValue]  # the front matter


class NoteList(Out):
    notes: list[NoteOut]
    problems: list[Problem]


class SearchOut(Out):
    query: str
    mode: str
    fallback_reason: str | None
    keyword_used: bool
    terms: list[str]
    incomplete: str | None  # why results may be missing: the index is still filling
    results: list[PublicHit]  # one shape for a hit, everywhere (`Hit.public`)


class DecisionOut(Out):
    text: str
    since: str
    by: str  # "distilled", a person's name, or "hand"
    sources: list[int]  # the messages it came from
    flag: str


class EarlierOut(Out):
    text: str
    since: str
    by: str
    sources: list[int]
    until: str
    changed_by: int | None  # the message that changed it (None: by hand)


class QuoteOut(Out):
    speaker: str
    text: str


class MemoryOut(Out):
    summary: str
    summary_html: str
    decisions: list[DecisionOut]
    quotes: list[QuoteOut]
    superseded: list[EarlierOut]


class MemoryFile(MemoryOut):
    markdown: str | None  # memory.md as written (None: a private channel's, kept in SQLite)
    error: str | None  # why memory.md cannot be read, when it cannot


class MemoryUndone(MemoryOut):
    revision_id: int


class MemoryStartedOver(MemoryUndone):
    retired: int  # decisions moved to the earlier ones
    message: str  # what happened, and how to undo it


class RevisionOut(Out):
    id: int
    source: str
    created_at: str
    memory: MemoryOut
    diff: str  # against the revision before


class NoteKey(Out):
    note: str


class Pin(Out):
    note: str
    pinned_at: str


class Unpinned(Out):
    ok: bool
    pins: list[str]


class Created(Out):
    id: int


class ThreadOut(Out):
    id: int
    title: str
    created_at: str
    updated_at: str
    messages: int
    snippet: str
    archived: bool
    deleted: bool
    source_id: str | None


class TraceHit(Out):
    key: str
    title: str
    score: float
    snippet: str


class SuggestedStep(Out):
    type: Literal["suggested"]
    categories: list[str]


class LoadStep(Out):
    type: Literal["load"]
    category: str
    ok: bool
    tools: list[str]
    ms: float


class ToolCallStep(Out):
    type: Literal["tool_call"]
    name: str
    arguments: dict[str, Any] | str  # as the model wrote them: any JSON object, or unreadable
    ok: bool
    summary: str
    ms: float
    writes: bool
    guard: Guard | None
    hits: list[TraceHit] | None
    count: int | None
    by: By


class ModeStep(Out):
    type: Literal["mode"]
    mode: ToolMode
    reason: str


class GuardStep(Out):
    type: Literal["guard"]
    guard: Guard
    detail: str


# One step of an answer's tool trace (`charlie.trace`), told apart by its `type`
TraceStep = Annotated[
    SuggestedStep | LoadStep | ToolCallStep | ModeStep | GuardStep, Field(discriminator="type")
]


class MessageOut(Out):
    id: int
    role: Literal["user", "assistant"]
    speaker: str
    content: str
    html: str | None  # a reply, as safe HTML
    created_at: str
    trace: list[TraceStep] | None  # what the answer searched and found
    thread: int
    alternatives: list[int] | None = None  # regenerated replies, edited versions


class SavedEvent(Out):
    """The data of an answer stream's `saved` event, its first (`/chat`, `/voice` after
    `heard`, and an edit's): the person's message, stored before the response started,
    with its id. Not in the OpenAPI schema, which cannot describe an event stream, but in
    the app's JSDoc types (`STREAM_EVENTS`); the route checks what it sends against it."""

    message: MessageOut


# The stream events with a model: not in the OpenAPI schema, but in the app's JSDoc types
# all the same (`apitypes.typedefs`).
STREAM_EVENTS: list[type[Out]] = [SavedEvent]


class Forgotten(Out):
    messages: int
    quotes: int
    revisions: int
    flagged: list[str]  # decisions whose only source was forgotten
    restated: int  # decisions that only restated it, gone with it


class Me(Out):
    name: str
    is_admin: bool


class Ok(Out):
    ok: bool


class Household(Out):
    has_people: bool


class Person(Out):
    name: str
    is_admin: bool
    can_sign_in: bool
    sessions: int
    discord: bool  # a Discord account is linked
    you: bool


class People(Out):
    people: list[Person]


class PasswordReset(Out):
    name: str
    ended_sessions: int


class Removal(Out):
    """What removing a person deletes and keeps (before: to confirm; after: what it did)."""

    name: str
    private_threads: int
    private_messages: int
    private_memory_revisions: int
    sessions: int
    tokens: int
    usage_events: int
    discord_links: int
    shared_messages: int  # kept, attributed by name
    text: str  # the same, in words


class MySessions(Out):
    sessions: int
    others: int


class Ended(Out):
    ended_sessions: int


class Models(Out):
    models: list[str]
    default: str | None
    base_url: str


class ProjectModel(Out):
    slug: str
    model: str | None


class TrashedProject(Out):
    kind: Literal["project"]
    id: str
    slug: str
    name: str
    deleted_at: str


class TrashedNote(Out):
    kind: Literal["note"]
    id: str
    project: str
    name: str
    title: str
    deleted_at: str


class Trash(Out):
    projects: list[TrashedProject]
    notes: list[TrashedNote]


class Trashed(Out):
    trashed: TrashedProject | TrashedNote | None


class RestoredProject(Out):
    kind: Literal["project"]
    slug: str
    name: str


class RestoredNote(Out):
    kind: Literal["note"]
    id: str
    title: str


class SignedIn(Out):
    user: Me


class Refused(Out):
    error: str
    kind: str


class DiscordCode(Out):
    code: str  # for `/charlie link CODE` in Discord
    expires_at: str
    linked: int  # Discord accounts already linked


class TokenOut(Out):
    id: int
    user_id: int
    user: str
    label: str
    read_only: bool
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    active: bool


class Tokens(Out):
    tokens: list[TokenOut]


class OneToken(Out):
    token: TokenOut


class NewTokenOut(Out):
    token: TokenOut
    secret: str  # in this answer only: it is never stored


class SaidOut(Out):
    """A message as recall shows it (the shape `charlie recall --json` prints)."""

    message_id: int
    speaker: str
    role: str
    time: str
    text: str


class RecallHitOut(SaidOut):
    source_id: str | None  # where an imported message came from
    thread: int
    score: float
    channel: str
    project: str | None
    in_time: bool | None  # inside the time the question named (None: it named none)
    why: str
    around: list[SaidOut]


class RecallOut(Out):
    query: str
    when: str | None  # the time the question named, in words
    terms: list[str]
    searched: list[str]  # the channels looked in
    truncated: bool
    incomplete: str | None  # why hits may be missing: the index is still catching up
    results: list[RecallHitOut]


class HistoryIndexing(Out):
    """How far the messages the caller may read are indexed for recall by meaning."""

    total: int
    indexed: int
    done: bool
    running: bool  # an indexer reported in the last minute, and its process is still there
    seconds_left: float | None
    line: str  # "indexing history: 41 % · about 6 min left"


class LlmHealth(Out):
    base_url: str
    model: str | None  # the model asked for; None: the server's default
    reachable: bool
    models: list[str | None] | None = None  # what the server offers (None: it did not say)
    error: str | None


class IndexHealth(Out):
    notes: int
    chunks: int
    problems: int
    model: str | None  # the embedding model that built it
    state: Literal["ready", "not built", "building", "rebuilding", "damaged", "unavailable"]
    rebuilt: str | None  # when and why a damaged or old index was last replaced
    incomplete: str | None  # while it fills: results are incomplete, and why
    error: str | None = None  # it cannot be read: what happens next


class Health(Out):
    version: str
    llm: LlmHealth
    index: IndexHealth
    history: HistoryIndexing | None  # None: the search index cannot be read now


class DoctorCheck(Out):
    check: str
    status: str  # ok, warn, slow, fail, skip, or unfinished (the doctor's time ran out)
    result: str
    fix: str
    essential: bool


class Doctor(Out):
    server: str
    source: str  # which server this is and why: "built-in (….gguf, …)", "LM Studio at …"
    model: str
    ok: bool
    slow: bool
    verdict: str
    checks: list[DoctorCheck]


class SpeechEngine(Out):
    name: str
    about: str
    online: bool
    state: EngineState  # loaded and able to try · failed to speak lately · cannot load here
    detail: str  # why, when it is not ready


class SpeechSurvey(Out):
    engines: list[SpeechEngine]
    speaks: str | None  # the engine the next sentence goes to first; None: none can
    offline: str | None  # the engine that speaks when the internet is not there
    advice: str


class VoiceStatus(Out):
    available: bool
    problem: str | None  # why voice does not work here
    stt_model: str
    tts: dict[str, str]  # each speech engine: ready, not tried, or why it rests
    speech: SpeechSurvey  # which engine will speak, which speaks offline, a better voice
    rate: int
    silence_ms: int
    max_seconds: float
    threshold: float
    spoken_sentences: int


class Heard(Out):
    text: str
    language: str | None
    seconds: float
    audio_seconds: float
    speech_seconds: float
    vad_seconds: float


class Uploaded(Out):
    note: NoteFull
    original: str  # the document as uploaded, under the project's attachments
    kind: str
    pages: int | None
    warning: str | None
    indexing: bool  # searchable in a moment


class ModelInstall(Out):
    """The starter model's install in the background, as the app polls it."""

    state: Literal["idle", "downloading", "checking", "done", "failed", "cancelled"]
    part: int  # the part being downloaded or joined, 1 … parts (0: not yet)
    parts: int
    bytes: int  # downloaded (then joined and checked) so far …
    total: int  # … of about this many
    line: str  # in words
    error: str | None  # why it failed


class BuiltinModel(Out):
    name: str  # from the file's metadata
    path: str
    size: int
    source: Literal["setting", "chosen", "starter"]  # CHARLIE_LLM_MODEL_FILE, `model use`…
    speed: str | None  # measured, in words


class StarterModel(Out):
    name: str
    size: int
    offer: str  # "1.1 GB download, about 6 minutes"
    installed: bool
    parts: int
    downloaded_parts: int  # of a stopped download, kept for the next install


class ModelStatus(Out):
    """The built-in model: the one Charlie would run when no model server answers."""

    model: BuiltinModel | None  # None: none installed or chosen
    problem: str | None  # the chosen file is gone or unreadable
    starter: StarterModel
    install: ModelInstall
    folder: str
