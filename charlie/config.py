"""Settings: one typed object, built at the edge and passed down.

Values come from, strongest first: explicit arguments, environment variables with the
`CHARLIE_` prefix, `charlie.toml` in the data home, then the defaults below.
"""

from __future__ import annotations

import getpass
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

ENV_PREFIX = "CHARLIE_"
SETTINGS_FILE = "charlie.toml"

# What to tell the person when a setting is wrong, by field name.
_FIXES: dict[str, str] = {
    "home": "set CHARLIE_HOME to a folder Charlie may write to",
    "llm_base_url": (
        "set CHARLIE_LLM_BASE_URL to your server's OpenAI-compatible URL, "
        "e.g. http://localhost:1234/v1 (LM Studio) or http://localhost:11434/v1 (Ollama)"
    ),
    "llm_timeout": "set CHARLIE_LLM_TIMEOUT to a number of seconds, e.g. 120",
    "llm_retries": "set CHARLIE_LLM_RETRIES to a whole number from 0 to 10",
    "quotes_window": "set CHARLIE_QUOTES_WINDOW to a whole number from 1 to 100",
    "embeddings": "set CHARLIE_EMBEDDINGS to 'local' (the packaged model) or 'openai'",
    "usage_half_life_days": "set CHARLIE_USAGE_HALF_LIFE_DAYS to a number of days above 0",
    "usage_weight": "set CHARLIE_USAGE_WEIGHT to a number from 0 to 10 (default 0.3)",
}


def default_home() -> Path:
    """The per-user data folder used when CHARLIE_HOME is not set."""
    return platformdirs.user_data_path("charlie", appauthor=False)


def _home_from_env() -> Path:
    raw = os.environ.get(f"{ENV_PREFIX}HOME")
    return Path(raw).expanduser() if raw else default_home()


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "me"


class Settings(BaseSettings):
    """Everything Charlie can be configured with."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    home: Path = Field(default_factory=default_home, description="The data home.")
    llm_base_url: str = Field(
        "http://localhost:1234/v1", description="OpenAI-compatible server (LM Studio default)."
    )
    llm_model: str = Field("", description="Model name; empty means the server's first model.")
    llm_api_key: SecretStr | None = Field(None, description="Bearer token, if needed.")
    llm_timeout: float = Field(120.0, gt=0, description="Seconds to wait for the server.")
    llm_retries: int = Field(2, ge=0, le=10, description="Retries for transient server errors.")
    user: str = Field(default_factory=_default_user, description="Who is talking in the CLI.")
    quotes_window: int = Field(8, ge=1, le=100, description="How many recent quotes to keep.")
    embeddings: Literal["local", "openai"] = Field(
        "local", description="local: the packaged MiniLM model; openai: a /v1/embeddings server."
    )
    embeddings_model: str = Field("", description="Model name for the embeddings server.")
    embeddings_base_url: str = Field("", description="Embeddings server (default: the LLM's).")
    usage_half_life_days: float = Field(30.0, gt=0, description="Usage fades by half in this.")
    usage_weight: float = Field(0.3, ge=0, le=10, description="score = sim × (1 + boost × w).")

    @field_validator("llm_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("home")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _home_from_env() / SETTINGS_FILE
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file))

    @property
    def db_path(self) -> Path:
        return self.home / "charlie.db"

    @property
    def projects_dir(self) -> Path:
        return self.home / "projects"


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning any bad value into a `SettingsError` that names it."""
    toml_file = _home_from_env() / SETTINGS_FILE
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
