"""Settings: one typed object, built at the edge and passed down.

Values come from, strongest first: explicit arguments, environment variables with the
`CHARLIE_` prefix, `charlie.toml` in the data home, then the defaults below.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from charlie.errors import SettingsError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")  # CHARLIE_DATABASE_URL's kinds
ENV_PREFIX = "CHARLIE_"
SETTINGS_FILE = "charlie.toml"

# What to tell the person when a setting is wrong, by field name.
_FIXES: dict[str, str] = {
    "home": "set CHARLIE_HOME to a folder Charlie may write to",
    "llm_base_url": (
        "set CHARLIE_LLM_BASE_URL to your server's OpenAI-compatible URL, "
        "e.g. http://localhost:1234/v1 (LM Studio) or http://localhost:11434/v1 (Ollama)"
    ),
    "llm": (
        "set CHARLIE_LLM to 'auto' (a configured server, else one found on this machine, "
        "else the built-in model), 'server' (CHARLIE_LLM_BASE_URL) or 'builtin'"
    ),
    "llm_probe": (
        "set CHARLIE_LLM_PROBE to the servers to look for, comma-separated NAME=URL pairs, "
        "e.g. 'LM Studio=http://127.0.0.1:1234/v1,Ollama=http://127.0.0.1:11434/v1'"
    ),
    "llm_threads": "set CHARLIE_LLM_THREADS to a number of CPU threads, or 0 to let Charlie choose",
    "llm_keep_alive": (
        "set CHARLIE_LLM_KEEP_ALIVE to the seconds the built-in model stays loaded after its "
        "last use, e.g. 300, or 0 to stop it at once"
    ),
    "llm_timeout": "set CHARLIE_LLM_TIMEOUT to a number of seconds, e.g. 120",
    "llm_retries": "set CHARLIE_LLM_RETRIES to a whole number from 0 to 10",
    "llm_context": (
        "set CHARLIE_LLM_CONTEXT to the model's context window in tokens (the server's "
        "n_ctx, e.g. 8192), or 0 to ask the server"
    ),
    "llm_max_tokens": "set CHARLIE_LLM_MAX_TOKENS to the longest answer in tokens, e.g. 1024",
    "distill_mode": "set CHARLIE_DISTILL_MODE to 'auto', 'whole' or 'steps'",
    "quotes_window": "set CHARLIE_QUOTES_WINDOW to a whole number from 1 to 100",
    "embeddings": "set CHARLIE_EMBEDDINGS to 'local' (the packaged model) or 'openai'",
    "usage_half_life_days": "set CHARLIE_USAGE_HALF_LIFE_DAYS to a number of days above 0",
    "usage_weight": "set CHARLIE_USAGE_WEIGHT to a number from 0 to 10 (default 0.3)",
    "discord_token": (
        "set CHARLIE_DISCORD_TOKEN to your bot's token (Discord developer portal → your "
        "application → Bot → Reset Token)"
    ),
    "voice_tts": (
        "set CHARLIE_VOICE_TTS to speech engines in the order to try, "
        "from edge, piper and espeak, e.g. 'piper,espeak'"
    ),
    "trusted_proxies": (
        "set CHARLIE_TRUSTED_PROXIES to the addresses of your reverse proxies, comma-separated "
        "(e.g. 127.0.0.1), or leave it empty when browsers connect to Charlie directly"
    ),
    "mcp_allowed_hosts": (
        "set CHARLIE_MCP_ALLOWED_HOSTS to the host names people reach Charlie by, "
        "comma-separated (e.g. charlie.home.arpa)"
    ),
    "llm_model_file": (
        "set CHARLIE_LLM_MODEL_FILE to the path of a GGUF model file, or unset it to use the "
        "one `charlie model use` chose"
    ),
    "model_dir": "set CHARLIE_MODEL_DIR to a folder Charlie may write models to",
    "voice_stt_engine": "set CHARLIE_VOICE_STT_ENGINE to 'whisper' (the one built so far)",
    "voice_stt_model": (
        "set CHARLIE_VOICE_STT_MODEL to a Whisper model name (tiny.en, base, small, …) "
        "or the folder of a CTranslate2 Whisper model"
    ),
}

TTS_ENGINES = ("edge", "piper", "espeak")
# Where `CHARLIE_LLM=auto` looks for a model server when none is configured: each local
# server's usual address, in this order.
USUAL_SERVERS = (
    "LM Studio=http://127.0.0.1:1234/v1,"
    "Ollama=http://127.0.0.1:11434/v1,"
    "llama.cpp=http://127.0.0.1:8080/v1"
)

INDEX_FILE = "index.db"  # the search index (`Settings.index_path`)


def default_home() -> Path:
    """The per-user data folder used when CHARLIE_HOME is not set."""
    return platformdirs.user_data_path("charlie", appauthor=False)


def default_model_cache() -> Path:
    """Where derived models are kept when CHARLIE_MODEL_CACHE is not set (shared by every
    data home of the user: a model, no person's data)."""
    raw = os.environ.get(f"{ENV_PREFIX}MODEL_CACHE")
    if raw:
        return Path(raw).expanduser()
    return platformdirs.user_cache_path("charlie", appauthor=False) / "models"


def default_model_dir() -> Path:
    """Where the built-in model lives when CHARLIE_MODEL_DIR is not set: the user's cache
    (${XDG_CACHE_HOME:-~/.cache}/charlie/models on Linux), never the data home, so a backup
    of the data home does not carry a gigabyte of model."""
    return platformdirs.user_cache_path("charlie", appauthor=False) / "models"


def _home_from_env() -> Path:
    raw = os.environ.get(f"{ENV_PREFIX}HOME")
    return Path(raw).expanduser() if raw else default_home()


def _home_of(overrides: dict[str, object]) -> Path:
    """The data home whose charlie.toml to read: an explicit `home=` wins over CHARLIE_HOME."""
    given = overrides.get("home")
    return Path(str(given)).expanduser() if given is not None else _home_from_env()


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "me"


class Settings(BaseSettings):
    """Everything Charlie can be configured with."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    home: Path = Field(default_factory=default_home, description="The data home.")
    llm: Literal["auto", "builtin", "server"] = Field(
        "auto",
        description="Which model answers: server (CHARLIE_LLM_BASE_URL), builtin (Charlie's "
        "own runtime on a GGUF file), or auto (a configured URL, else a server found on this "
        "machine, else the built-in model).",
    )
    llm_probe: str = Field(
        USUAL_SERVERS,
        description="The servers `auto` looks for, in order (comma-separated NAME=URL).",
    )
    llm_base_url: str = Field(
        "http://localhost:1234/v1", description="OpenAI-compatible server (LM Studio default)."
    )
    llm_model: str = Field("", description="Model name; empty means the server's first model.")
    llm_api_key: SecretStr | None = Field(None, description="Bearer token, if needed.")
    llm_threads: int = Field(
        0,
        ge=0,
        le=512,
        description="The built-in runtime's CPU threads; 0: chosen from the machine.",
    )
    llm_keep_alive: float = Field(
        300.0,
        ge=0,
        le=86_400,
        description="Seconds the built-in runtime stays loaded after its last user ends, so "
        "the next `charlie chat -m` answers warm; 0: it stops at once.",
    )
    llm_timeout: float = Field(120.0, gt=0, description="Seconds to wait for the server.")
    llm_retries: int = Field(2, ge=0, le=10, description="Retries for transient server errors.")
    llm_context: int = Field(
        0, ge=0, le=10_000_000, description="Context window in tokens; 0: ask the server."
    )
    llm_max_tokens: int = Field(
        1024, ge=16, le=1_000_000, description="The longest answer, in tokens (max_tokens)."
    )
    llm_model_file: Path | None = Field(
        None,
        description="The GGUF file the built-in runtime loads; None: the one `charlie model "
        "use` chose, else the starter model (`charlie model install`).",
    )
    model_dir: Path = Field(
        default_factory=default_model_dir,
        description="Where the built-in model is kept: the starter model, its download, and "
        "the record of which model is chosen.",
    )
    tool_mode: Literal["auto", "native", "text", "constrained"] = Field(
        "auto",
        description="How the model is offered tools: native calls, calls written as text, "
        "constrained JSON steps, or auto (chosen from what the model does).",
    )
    distill_mode: Literal["auto", "whole", "steps"] = Field(
        "auto",
        description="How memory is distilled: in one request (whole), in small steps for a "
        "small model (steps), or auto (steps when the model's tools are constrained).",
    )
    user: str = Field(default_factory=_default_user, description="Who is talking in the CLI.")
    database_url: str = Field(
        "",
        description="postgresql://… : keep what charlie.db holds (people, messages, memory "
        "revisions, usage) in that PostgreSQL database instead; empty: charlie.db, SQLite.",
    )
    local_dir: Path | None = Field(
        None,
        description="This machine's own files: the search index (index.db, derived from the "
        "rows and notes) and the built-in model runtime's state; unset: the data home. Give "
        "each machine its own, on a local disk, when several share one data home and one "
        "PostgreSQL database.",
    )
    quotes_window: int = Field(8, ge=1, le=100, description="How many recent quotes to keep.")
    embeddings: Literal["local", "openai"] = Field(
        "local", description="local: the packaged MiniLM model; openai: a /v1/embeddings server."
    )
    embeddings_model: str = Field("", description="Model name for the embeddings server.")
    embeddings_base_url: str = Field("", description="Embeddings server (default: the LLM's).")
    model_cache: Path = Field(
        default_factory=default_model_cache,
        description="Where the local embedding model derived from the packaged one is kept.",
    )
    usage_half_life_days: float = Field(30.0, gt=0, description="Usage fades by half in this.")
    usage_weight: float = Field(0.3, ge=0, le=10, description="score = sim × (1 + boost × w).")
    trusted_proxies: str = Field(
        "",
        description="Reverse proxies whose X-Forwarded-For is believed (comma-separated "
        "addresses or networks); empty: none, the connecting address is the client's.",
    )
    mcp_allowed_hosts: str = Field(
        "",
        description="Host names /mcp answers to besides IP addresses and localhost "
        "(comma-separated, e.g. charlie.home.arpa): DNS-rebinding protection.",
    )
    discord_token: SecretStr | None = Field(
        None, description="The Discord bot's token (charlie[discord]; never logged)."
    )
    # Voice (the charlie[voice] extra; docs/voice.md)
    voice_stt_engine: Literal["whisper"] = Field(
        "whisper", description="Speech recogniser; more engines plug in as Transcribers."
    )
    voice_stt_model: str = Field("tiny.en", description="Whisper model name or model folder.")
    voice_stt_compute: str = Field("int8", description="CTranslate2 compute type on the CPU.")
    voice_stt_threads: int = Field(0, ge=0, le=64, description="CPU threads; 0 means all.")
    voice_language: str = Field("", description="Spoken language code; empty: detect.")
    voice_allow_download: bool = Field(
        False, description="Let faster-whisper download a model that is not installed."
    )
    voice_tts: str = Field("edge,piper,espeak", description="Speech engines, in order.")
    voice_edge_voice: str = Field("en-US-AriaNeural", description="Edge-TTS voice name.")
    voice_edge_timeout: float = Field(5.0, gt=0, description="Seconds to wait for Edge-TTS.")
    voice_edge_proxy: str = Field("", description="HTTP proxy for Edge-TTS, if needed.")
    voice_piper_model: str = Field("", description="Piper voice .onnx; empty: the packaged one.")
    voice_espeak_voice: str = Field("en-us", description="espeak-ng voice.")
    voice_silence_ms: int = Field(
        700, ge=100, le=5000, description="Trailing silence that ends an utterance."
    )
    voice_max_utterance_s: float = Field(
        30.0, gt=1, le=300, description="Longest utterance before it is cut."
    )
    voice_vad_threshold: float = Field(
        0.5, gt=0, lt=1, description="Speech probability that counts as voice."
    )
    voice_spoken_sentences: int = Field(3, ge=1, le=20, description="Sentences in a spoken reply.")
    voice_spoken_chars: int = Field(
        450, ge=40, le=5000, description="Characters in a spoken reply, at most."
    )

    @field_validator("llm_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(POSTGRES_SCHEMES):
            raise ValueError("it is not a postgresql:// URL (leave it empty for SQLite)")
        return value

    @field_validator("llm_probe")
    @classmethod
    def _probes(cls, value: str) -> str:
        pairs = [p.strip() for p in value.split(",") if p.strip()]
        for pair in pairs:
            name, _, url = pair.partition("=")
            if not name.strip() or not url.strip().startswith(("http://", "https://")):
                raise ValueError(f"{pair!r} is not NAME=http(s)://…")
        return ",".join(pairs)

    @property
    def probes(self) -> list[tuple[str, str]]:
        """`llm_probe` as (name, base URL) pairs, in order."""
        pairs = (p.partition("=") for p in self.llm_probe.split(",") if p)
        return [(name.strip(), url.strip().rstrip("/")) for name, _, url in pairs]

    @field_validator("llm_model_file")
    @classmethod
    def _expand_model_file(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("voice_tts")
    @classmethod
    def _engines(cls, value: str) -> str:
        names = [n.strip().lower() for n in value.split(",") if n.strip()]
        unknown = [n for n in names if n not in TTS_ENGINES]
        if not names or unknown:
            raise ValueError(f"{value!r} names no engine or an unknown one ({', '.join(unknown)})")
        return ",".join(names)

    @property
    def tts_order(self) -> list[str]:
        return self.voice_tts.split(",")

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: str) -> str:
        names = [n.strip() for n in value.split(",") if n.strip()]
        for name in names:
            try:
                ipaddress.ip_network(name, strict=False)
            except ValueError as exc:
                raise ValueError(f"{name!r} is not an IP address or network") from exc
        return ",".join(names)

    @field_validator("mcp_allowed_hosts")
    @classmethod
    def _hosts(cls, value: str) -> str:
        names = [n.strip().lower() for n in value.split(",") if n.strip()]
        for name in names:
            if not all(part and part.replace("-", "").isalnum() for part in name.split(".")):
                raise ValueError(f"{name!r} is not a host name")
        return ",".join(names)

    @field_validator("home", "model_dir")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("llm_model_file", "local_dir", mode="before")
    @classmethod
    def _expand_file(cls, value: object) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None  # CHARLIE_LLM_MODEL_FILE= (empty) means unset
        return Path(str(value)).expanduser()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _home_of(getattr(init_settings, "init_kwargs", {})) / SETTINGS_FILE
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file))

    @property
    def db_path(self) -> Path:
        return self.home / "charlie.db"

    @property
    def local_home(self) -> Path:
        """Where this machine keeps its own files (`local_dir`, else the data home)."""
        return self.local_dir or self.home

    @property
    def index_path(self) -> Path:
        """The search index's file, in `local_home`."""
        return self.local_home / INDEX_FILE

    @property
    def projects_dir(self) -> Path:
        return self.home / "projects"


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning any bad value into a `SettingsError` that names it.

    `home=X` reads X's own charlie.toml (never the one in CHARLIE_HOME)."""
    toml_file = _home_of(overrides) / SETTINGS_FILE
    try:
        return Settings(**overrides)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{toml_file} is not valid TOML ({exc}); fix or remove it.") from exc
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            name = f"{ENV_PREFIX}{field.upper()}"
            fix = _FIXES.get(field, f"check {name} in the environment or in {toml_file}")
            problems.append(f"setting {name}: {err['msg']}; {fix}")
        raise SettingsError("; ".join(problems)) from exc
