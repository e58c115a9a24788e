from pathlib import Path

import pytest

from charlie.config import load_settings
from charlie.errors import SettingsError


def test_defaults_point_at_lm_studio(charlie_home: Path) -> None:
    settings = load_settings()
    assert settings.home == charlie_home
    assert settings.llm_base_url == "http://localhost:1234/v1"
    assert settings.llm_model == ""
    assert settings.llm_api_key is None
    assert settings.db_path == charlie_home / "charlie.db"


def test_environment_overrides_the_settings_file(
    charlie_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    charlie_home.mkdir(parents=True)
    (charlie_home / "charlie.toml").write_text(
        'llm_model = "from-file"\nllm_base_url = "http://file:1/v1"\n'
    )
    monkeypatch.setenv("CHARLIE_LLM_MODEL", "from-env")
    settings = load_settings()
    assert settings.llm_model == "from-env"
    assert settings.llm_base_url == "http://file:1/v1"


def test_bad_url_names_the_setting_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_LLM_BASE_URL", "localhost:1234")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "CHARLIE_LLM_BASE_URL" in str(err.value)
    assert "http://localhost:1234/v1" in str(err.value)


def test_bad_number_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARLIE_LLM_TIMEOUT", "soon")
    with pytest.raises(SettingsError, match="CHARLIE_LLM_TIMEOUT"):
        load_settings()


def test_broken_settings_file_is_named(charlie_home: Path) -> None:
    charlie_home.mkdir(parents=True)
    (charlie_home / "charlie.toml").write_text("llm_model = \n")
    with pytest.raises(SettingsError, match=r"charlie\.toml is not valid TOML"):
        load_settings()


def test_unknown_key_in_settings_file_is_refused(charlie_home: Path) -> None:
    charlie_home.mkdir(parents=True)
    (charlie_home / "charlie.toml").write_text('llm_modle = "typo"\n')
    with pytest.raises(SettingsError, match="CHARLIE_LLM_MODLE"):
        load_settings()
