"""The errors Charlie shows to the person.

Every subclass of `CharlieError` carries a message written for the person using Charlie:
what went wrong and what to do about it. Adapters translate these once (the CLI prints
`Error: …` and exits 1); anything else escaping is a bug.
"""


class CharlieError(Exception):
    """A failure the person should see, with what to do about it."""


class SettingsError(CharlieError):
    """A setting has a bad value."""


class NotFound(CharlieError):
    """A project, user, revision or other named thing does not exist."""


class MessageGone(NotFound):
    """The message a reply or an edit was to follow was forgotten meanwhile (while Charlie
    was answering it, say): nothing was stored after it."""


class AlreadyForgotten(NotFound):
    """A message asked to be forgotten was forgotten already (and the search index is
    scrubbed of it now)."""


class Conflict(CharlieError):
    """Something with that name already exists."""


class InvalidName(CharlieError):
    """A project slug or user name is not acceptable."""


class UnstorableText(CharlieError):
    """Text the store cannot hold (a NUL character, in PostgreSQL): bad input, not a broken
    database."""


class DatabaseError(CharlieError):
    """The database (charlie.db) cannot be used; the subclasses say why and what to do.

    Only `DatabaseDamaged` means the file itself is at fault: the others leave it whole.
    """


class DiskFull(DatabaseError):
    """The disk holding the database is full (SQLITE_FULL). Nothing saved is lost: free
    some space and try again."""


class DiskError(DatabaseError):
    """The disk could not be read or written (SQLITE_IOERR): unplugged, failing, or a
    network drive that went away."""


class DatabaseNotWritable(DatabaseError):
    """Charlie may not write the database file or its folder, or the disk is read-only."""


class DatabaseBusy(DatabaseError):
    """Another process held the database's write lock past the busy timeout."""


class ForgetUnfinished(DatabaseError):
    """Messages are forgotten in charlie.db, but the search index (index.db) could not be
    scrubbed of them yet (busy, a full disk): whoever uses the index next finishes it."""


class DatabaseDamaged(DatabaseError):
    """The file is not a SQLite database, or is malformed. Private channels live only in
    it, so the person is told to keep a copy — never to delete it."""


class BrokenThread(DatabaseDamaged):
    """A thread's messages do not form a chain: one follows itself, or a later message
    (charlie.db edited by hand, or damaged). Charlie stops rather than follow it forever."""


class MemoryFormatError(CharlieError):
    """memory.md could not be read as the three memory layers."""


class LLMError(CharlieError):
    """The language model server could not give a usable answer."""


class LLMUnavailable(LLMError):
    """The server could not be reached, or kept failing."""


class ModelRuntimeError(LLMUnavailable):
    """Charlie's built-in model runtime (`charlie.llm.runtime`) could not start, or could
    not load its model file."""


class LLMModelNotFound(LLMError):
    """The server does not know the configured model."""


class LLMBadResponse(LLMError):
    """The server answered something that is not a valid OpenAI-compatible response."""


class LLMStreamError(LLMBadResponse):
    """The server ended a streamed answer with an error of its own (llama.cpp does when it
    cannot parse the model's tool-call output)."""


class LLMRejected(LLMError):
    """The server refused the request (HTTP 4xx)."""


class LLMContextExceeded(LLMError):
    """The request was longer than the model's context window; `window` is the window the
    server named, when it did."""

    def __init__(self, message: str, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window


class LLMPromptTruncated(LLMContextExceeded):
    """The server answered, but read far fewer prompt tokens than were sent: its window is
    smaller than the prompt and it dropped the start without saying so (Ollama does).
    `window` is what it did read; `estimated` is Charlie's (low) estimate of what was sent."""

    def __init__(self, message: str, *, window: int, estimated: int) -> None:
        super().__init__(message, window)
        self.estimated = estimated


class ModelError(CharlieError):
    """The built-in model: a model file Charlie cannot use, or its download."""


class ModelRefused(ModelError):
    """A model file Charlie will not load: not GGUF, damaged or cut short, without a chat
    template, or too large for this machine's memory. Nothing was recorded."""


class ModelDamaged(ModelError):
    """The starter model's joined parts do not have the pinned size and sha256: the file is
    deleted, never loaded."""


class ModelMissing(NotFound):
    """The model file chosen (`charlie model use`, CHARLIE_LLM_MODEL_FILE) is not there."""


class InstallCancelled(ModelError):
    """The starter model's install was stopped (the app's Cancel): nothing half-written is
    left, and the parts downloaded are kept for the next install."""


class ConsentNeeded(ModelError):
    """A large download was asked for without the person's yes (`--yes` in a script)."""


class DistillationError(CharlieError):
    """The model's distillation could not be turned into valid memory."""


class AlreadyDistilled(DistillationError):
    """The messages a distillation worked on were folded into memory (or set aside) by
    someone else while it ran: it wrote nothing, and nothing failed."""


class Unauthorized(CharlieError):
    """A request carried no valid credentials: an unknown, malformed or revoked token."""


class Busy(CharlieError):
    """Too much of one kind of work is running at once: try again in a moment."""


class Forbidden(CharlieError):
    """Something only a household administrator may do."""


class PrivacyError(CharlieError):
    """An operation would expose one person's private channel to another."""


class VoiceUnavailable(CharlieError):
    """A voice part (speech recognition or an engine to speak) is not installed or not reachable."""


class AudioError(CharlieError):
    """Audio that cannot be read: an unknown format, no sound, or too long."""
