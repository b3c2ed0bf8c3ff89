"""Tests of providers/credentials.py: where keys and base URLs come from, and key hygiene.

Every test passes an explicit environment mapping and a temporary config directory; the
real environment and the real ~/.config are never read.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from grove.providers.base import ProviderName
from grove.providers.credentials import base_url, config_dir, load_api_key
from grove.providers.errors import MissingCredentialsError

CANARY = "sk-canary-7f3a9c1e5b2d4f60"
PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai", "google")

REFERENCE_MISSING_ANTHROPIC = """\
No credentials for anthropic. Set ANTHROPIC_API_KEY or add to credentials.json

Get your API key at: https://console.anthropic.com/settings/keys"""


def write_credentials(directory: Path, content: str, mode: int = 0o600) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "credentials.json"
    path.write_text(content, encoding="utf-8")
    path.chmod(mode)
    return path


def xdg(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path), **extra}


# --- where the key comes from -------------------------------------------------------------


def test_environment_beats_the_credentials_file(tmp_path: Path) -> None:
    write_credentials(tmp_path / "grove", json.dumps({"openai": {"api_key": "from-file"}}))
    environ = xdg(tmp_path, OPENAI_API_KEY="from-env")
    assert load_api_key("openai", environ=environ) == "from-env"
    assert load_api_key("openai", environ=xdg(tmp_path)) == "from-file"
    assert load_api_key("openai", environ=xdg(tmp_path, OPENAI_API_KEY="")) == "from-file"


def test_credentials_file_lives_in_xdg_config_home_grove(tmp_path: Path) -> None:
    assert config_dir({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "grove"
    assert config_dir({}) == Path.home() / ".config" / "grove"
    keys = {provider: {"api_key": f"key-{provider}"} for provider in PROVIDERS}
    write_credentials(tmp_path / "grove", json.dumps(keys))
    for provider in PROVIDERS:
        assert load_api_key(provider, environ=xdg(tmp_path)) == f"key-{provider}"


def test_an_explicit_directory_is_used_instead_of_the_config_dir(tmp_path: Path) -> None:
    write_credentials(tmp_path / "elsewhere", json.dumps({"anthropic": {"api_key": "k"}}))
    assert load_api_key("anthropic", environ=xdg(tmp_path), directory=tmp_path / "elsewhere") == "k"


def test_gemini_api_key_is_a_fallback_for_google(tmp_path: Path) -> None:
    assert load_api_key("google", environ=xdg(tmp_path, GEMINI_API_KEY="gem")) == "gem"
    both = xdg(tmp_path, GOOGLE_API_KEY="goo", GEMINI_API_KEY="gem")
    assert load_api_key("google", environ=both) == "goo"


def test_a_key_for_another_provider_does_not_count(tmp_path: Path) -> None:
    write_credentials(tmp_path / "grove", json.dumps({"openai": {"api_key": "o"}}))
    with pytest.raises(MissingCredentialsError):
        load_api_key("anthropic", environ=xdg(tmp_path, OPENAI_API_KEY="o"))


# --- missing credentials ------------------------------------------------------------------


def test_missing_anthropic_credentials_text_is_the_reference_text(tmp_path: Path) -> None:
    with pytest.raises(MissingCredentialsError) as caught:
        load_api_key("anthropic", environ=xdg(tmp_path))
    assert str(caught.value) == REFERENCE_MISSING_ANTHROPIC
    assert caught.value.provider == "anthropic"
    assert not caught.value.retryable


@pytest.mark.parametrize(
    ("provider", "variable", "page"),
    [
        ("openai", "OPENAI_API_KEY", "https://platform.openai.com/api-keys"),
        ("google", "GOOGLE_API_KEY", "https://aistudio.google.com/app/apikey"),
    ],
)
def test_missing_credentials_text_names_each_provider_key_page(
    tmp_path: Path, provider: ProviderName, variable: str, page: str
) -> None:
    with pytest.raises(MissingCredentialsError) as caught:
        load_api_key(provider, environ=xdg(tmp_path))
    assert str(caught.value) == (
        f"No credentials for {provider}. Set {variable} or add to credentials.json\n"
        f"\nGet your API key at: {page}"
    )


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"anthropic": {}}),
        json.dumps({"anthropic": {"api_key": ""}}),
        json.dumps({"anthropic": {"api_key": 42}}),
        json.dumps({"anthropic": "sk-not-in-an-object"}),
        json.dumps(["anthropic"]),
        "null",
    ],
)
def test_unusable_entries_count_as_missing(tmp_path: Path, content: str) -> None:
    write_credentials(tmp_path / "grove", content)
    with pytest.raises(MissingCredentialsError) as caught:
        load_api_key("anthropic", environ=xdg(tmp_path))
    assert str(caught.value) == REFERENCE_MISSING_ANTHROPIC


# --- file hygiene -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_file_readable_by_others_is_made_0600_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    path = write_credentials(tmp_path / "grove", json.dumps({"anthropic": {"api_key": "k"}}), mode)
    with caplog.at_level(logging.WARNING):
        assert load_api_key("anthropic", environ=xdg(tmp_path)) == "k"
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"Warning: {path} could be read by other users (mode {mode:o}); it is now 0600"
    ]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_mode_600_file_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_credentials(tmp_path / "grove", json.dumps({"anthropic": {"api_key": "k"}}))
    with caplog.at_level(logging.DEBUG, logger="grove.credentials"):
        assert load_api_key("anthropic", environ=xdg(tmp_path)) == "k"
    assert caplog.records == []


def test_the_file_is_not_read_when_the_environment_has_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_credentials(tmp_path / "grove", "{not json", 0o644)
    with caplog.at_level(logging.DEBUG, logger="grove.credentials"):
        assert load_api_key("anthropic", environ=xdg(tmp_path, ANTHROPIC_API_KEY="e")) == "e"
    assert caplog.records == []


@pytest.mark.parametrize(
    "content",
    ["{not json", '{"anthropic": {"api_key": "x"}', "", "\ufeff{}x"],
    ids=["garbage", "truncated", "empty", "trailing"],
)
def test_malformed_json_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    write_credentials(tmp_path / "grove", content)
    with caplog.at_level(logging.WARNING, logger="grove.credentials"):
        assert load_api_key("openai", environ=xdg(tmp_path, OPENAI_API_KEY="e")) == "e"
        with pytest.raises(MissingCredentialsError):
            load_api_key("anthropic", environ=xdg(tmp_path))
    assert len(caplog.records) == 1
    assert "not valid JSON" in caplog.records[0].getMessage()


def test_a_file_that_is_not_utf8_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "grove"
    directory.mkdir()
    (directory / "credentials.json").write_bytes(b'{"anthropic": {"api_key": "\xff\xfe"}}')
    (directory / "credentials.json").chmod(0o600)
    with (
        caplog.at_level(logging.WARNING, logger="grove.credentials"),
        pytest.raises(MissingCredentialsError),
    ):
        load_api_key("anthropic", environ=xdg(tmp_path))
    assert len(caplog.records) == 1


def test_an_unreadable_path_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "grove" / "credentials.json").mkdir(parents=True)
    with (
        caplog.at_level(logging.WARNING, logger="grove.credentials"),
        pytest.raises(MissingCredentialsError),
    ):
        load_api_key("anthropic", environ=xdg(tmp_path))
    assert len(caplog.records) == 1
    assert "cannot read" in caplog.records[0].getMessage()


# --- the key never leaks ------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"anthropic": {"api_key": CANARY}}),
        json.dumps({"google": {"api_key": CANARY}}),
        '{"anthropic": {"api_key": "' + CANARY + '"',
        '{"anthropic": {"api_key": "' + CANARY + '"}}\x00',
        CANARY,
    ],
    ids=["valid", "other-provider", "truncated", "trailing-nul", "bare-key"],
)
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_a_canary_key_never_reaches_logs_or_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str, mode: int
) -> None:
    write_credentials(tmp_path / "grove", content, mode)
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for provider in PROVIDERS:
            try:
                load_api_key(provider, environ=xdg(tmp_path))
            except MissingCredentialsError as exc:
                texts.extend([str(exc), repr(exc), repr(exc.args)])
        load_api_key("openai", environ=xdg(tmp_path, OPENAI_API_KEY=CANARY))
    texts.extend(record.getMessage() for record in caplog.records)
    texts.extend(repr(record.args) for record in caplog.records)
    assert texts, "each case produces at least one error or log record"
    assert not [text for text in texts if CANARY in text]


# --- base URLs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "variable", "default"),
    [
        ("anthropic", "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
        ("openai", "OPENAI_BASE_URL", "https://api.openai.com"),
        ("google", "GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"),
    ],
)
def test_base_url_precedence(provider: ProviderName, variable: str, default: str) -> None:
    configured = "http://127.0.0.1:9001"
    env = {variable: "http://127.0.0.1:9000/"}
    assert base_url(provider, configured=configured, environ=env) == "http://127.0.0.1:9000"
    assert base_url(provider, configured=configured, environ={}) == configured
    assert base_url(provider, configured=configured, environ={variable: ""}) == configured
    assert base_url(provider, environ={}) == default
    other = "OPENAI_BASE_URL" if provider != "openai" else "ANTHROPIC_BASE_URL"
    assert base_url(provider, environ={other: "http://127.0.0.1:1"}) == default


def test_openai_base_url_accepts_the_v1_suffix() -> None:
    for url in ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"):
        assert base_url("openai", configured=url, environ={}) == "http://127.0.0.1:8000"
        assert base_url("openai", environ={"OPENAI_BASE_URL": url}) == "http://127.0.0.1:8000"
    # Only the last path segment, and only for OpenAI.
    assert base_url("openai", configured="http://h/v1/proxy", environ={}) == "http://h/v1/proxy"
    assert base_url("anthropic", configured="http://h/v1", environ={}) == "http://h/v1"


def test_an_explicit_mapping_is_the_whole_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
    with pytest.raises(MissingCredentialsError):
        load_api_key("anthropic", environ=xdg(tmp_path))
    assert base_url("anthropic", environ={}) == "https://api.anthropic.com"
