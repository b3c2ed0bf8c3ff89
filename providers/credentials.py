"""Who signs in where: API keys (environment, then credentials.json) and base URLs.

Keys are read when a provider first needs one and are handed only to that provider; they are
never logged, stored or put into an error text.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from grove.providers.base import ProviderName
from grove.providers.errors import MissingCredentialsError, ProviderConfigError
from grove.providers.private_files import exposed_mode, keep_private
from grove.providers.secrets import remember_secret, remember_url_secrets, without_userinfo

log = logging.getLogger("grove.credentials")

API_KEY_ENV: dict[ProviderName, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}
BASE_URL_ENV: dict[ProviderName, str] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "google": "GOOGLE_GEMINI_BASE_URL",
}
DEFAULT_BASE_URLS: dict[ProviderName, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "google": "https://generativelanguage.googleapis.com",
}
KEY_PAGES: dict[ProviderName, str] = {
    "anthropic": "https://console.anthropic.com/settings/keys",
    "openai": "https://platform.openai.com/api-keys",
    "google": "https://aistudio.google.com/app/apikey",
}
CREDENTIALS_FILE = "credentials.json"


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/grove`, or `~/.config/grove` when XDG_CONFIG_HOME is unset."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "grove"


def missing_credentials_text(provider: ProviderName) -> str:
    return (
        f"No credentials for {provider}. Set {API_KEY_ENV[provider][0]} or add to "
        f"{CREDENTIALS_FILE}\n\nGet your API key at: {KEY_PAGES[provider]}"
    )


def credentials_file_problem(path: Path) -> str | None:
    """What `grove doctor` says of a file that group or others can read, else None (it only
    looks: reading keys makes the file 0600, see keep_private)."""
    mode = exposed_mode(path)
    if mode is None:
        return None
    return f"Warning: {path} can be read by other users (mode {mode:o}); run: chmod 600 {path}"


def warn_if_credentials_exposed(environ: Mapping[str, str] | None = None) -> None:
    """Make credentials.json in the config directory 0600, with a warning, when other users
    can read it (providers/private_files.py); keys are read in host processes, whose logs the
    user does not see, so the command line calls this in its own process."""
    keep_private(config_dir(environ) / CREDENTIALS_FILE)


def _key_from_file(provider: ProviderName, path: Path, *, warn: bool = True) -> str | None:
    """The provider's key in the credentials file at `path`; `warn`: log what is wrong with
    the file, and make it 0600 if others can read it (a check that only looks leaves that to
    the reading that follows)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        if warn:
            log.warning("cannot read %s: %s", path, exc.strerror)
        return None
    if warn:
        keep_private(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        if warn:
            log.warning("%s is not valid JSON; ignoring it", path)
        return None
    entry = data.get(provider) if isinstance(data, dict) else None
    key = entry.get("api_key") if isinstance(entry, dict) else None
    return key if isinstance(key, str) and key else None


def load_api_key(
    provider: ProviderName,
    *,
    environ: Mapping[str, str] | None = None,
    directory: Path | None = None,
) -> str:
    """The environment first, then credentials.json; MissingCredentialsError if neither."""
    env = os.environ if environ is None else environ
    for name in API_KEY_ENV[provider]:
        value = env.get(name)
        if value:
            remember_secret(value)
            return value
    key = _key_from_file(provider, (directory or config_dir(env)) / CREDENTIALS_FILE)
    if key is None:
        raise MissingCredentialsError(missing_credentials_text(provider), provider=provider)
    remember_secret(key)
    return key


def signed_in(environ: Mapping[str, str] | None = None) -> list[ProviderName]:
    """The providers that have a key here (environment or credentials.json), found without
    keeping any key: what a command checks before it starts a Grove."""
    env = os.environ if environ is None else environ
    path = config_dir(env) / CREDENTIALS_FILE
    return [
        provider
        for provider, names in API_KEY_ENV.items()
        if any(env.get(name) for name in names)
        or _key_from_file(provider, path, warn=False) is not None
    ]


def base_url_problem(url: str) -> str | None:
    """Why `url` cannot be a provider's base URL (shown without any password), or None."""
    shown = without_userinfo(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"base URL {shown!r} is not a URL: {exc}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"base URL {shown!r} must start with http:// or https://"
    if not parts.hostname:
        return f"base URL {shown!r} names no host"
    return None


def base_url(
    provider: ProviderName,
    *,
    configured: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Environment, then the config file's value, then the vendor's own URL.

    An OpenAI base ending in `/v1` (the SDK convention) is accepted: the wire adds `/v1/...`.
    """
    env = os.environ if environ is None else environ
    from_env = env.get(BASE_URL_ENV[provider])
    url = from_env or configured or DEFAULT_BASE_URLS[provider]
    remember_url_secrets(url)
    problem = base_url_problem(url)
    if problem:
        source = BASE_URL_ENV[provider] if from_env else f"providers.{provider}.base_url"
        raise ProviderConfigError(f"{source}: {problem}", provider=provider)
    url = url.rstrip("/")
    if provider == "openai" and url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url
