"""Settings: one frozen model, read from keyword arguments and ``SPILLSTORE_*`` variables.

Precedence is written once, in :meth:`Settings.settings_customise_sources`: explicit
keyword arguments beat the environment, which beats the defaults. Nothing else is read
(no ``.env`` file, no secrets directory, no command line).

Every invalid value raises :class:`~spillstore._errors.ConfigError` naming the field and
its environment variable; a bad value is never replaced by a default.

Sizes are UTF-8 bytes, given as whole numbers or human sizes (``"50KB"`` is 50,000,
``"10MiB"`` is 10,485,760); :mod:`spillstore._core.units` parses them. Caps that can be
turned off take ``"off"`` (or ``None``); ``0`` never means "off".

Environment variables are matched case-insensitively (pydantic-settings' default), so
``spillstore_max_bytes`` works too. Unknown keyword arguments and mapping keys are
rejected, and so is an unknown ``SPILLSTORE_*`` variable (pydantic-settings alone would
ignore it, as it looks up only the variables of known fields): a typo such as
``SPILLSTORE_MAX_BYTE`` is an error with a suggestion, never a silent default. The
variables spillstore reads that are not settings are listed once, in
:data:`OTHER_ENV_VARS` and :data:`OTHER_ENV_PREFIXES`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Self

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from spillstore._core.checks import at_most, shown
from spillstore._core.units import parse_duration, parse_size
from spillstore._errors import ConfigError

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "MAX_INLINE_BYTES",
    "MAX_STORED_BYTES",
    "MIN_BUDGET_BYTES",
    "MIN_MAX_LINE_BYTES",
    "MIN_RETENTION_BYTES",
    "OTHER_ENV_PREFIXES",
    "OTHER_ENV_VARS",
    "POINTER_RESERVE_BYTES",
    "Settings",
    "env_var_name",
    "field_label",
    "fit_previews",
    "parse_duration",
    "parse_size",
]

MIN_BUDGET_BYTES: Final = 2_048
"""The smallest ``max_bytes`` accepted: below it the pointer notice alone may not fit."""

POINTER_RESERVE_BYTES: Final = 1_536
"""Room kept for the pointer notice (spill id, path, ranges, recovery hints, suffix
markers): ``head_bytes + tail_bytes + POINTER_RESERVE_BYTES`` must not exceed
``max_bytes``."""

DEFAULT_HEAD_BYTES: Final = 4_096
DEFAULT_TAIL_BYTES: Final = 1_024
"""The preview sizes when neither is set and ``max_bytes`` has room for both; a smaller
budget shrinks the previews nobody set (see :func:`_fitted_previews`)."""

MIN_MAX_LINE_BYTES: Final = 80
"""The smallest per-line cut accepted: a shorter cut would leave lines unreadable."""

MIN_RETENTION_BYTES: Final = 4_096
"""The smallest retention cap accepted (when the cap is on)."""

DEFAULT_RETAINED_TAIL_BYTES: Final = 1024**2
"""The retained tail when none is set (a tenth of the retention when that is 1 MiB or
less, so a small ``retention_bytes`` works alone)."""

MAX_INLINE_BYTES: Final = 1024**3
"""The largest budget, preview or line cut (1 GiB): such sizes are held in memory."""
MAX_STORED_BYTES: Final = 1024**5
"""The largest retention cap or retained tail accepted (1 PiB)."""

_ENV_PREFIX: Final = "SPILLSTORE_"
_STORED_FIELDS: Final = ("retention_bytes", "retained_tail_bytes")
_OFF_FIELDS: Final = ("max_line_bytes", "retention_bytes")
_SIZE_FIELDS: Final = ("max_bytes", "head_bytes", "tail_bytes", "retained_tail_bytes", *_OFF_FIELDS)

OTHER_ENV_VARS: Final[Mapping[str, str]] = {
    "SPILLSTORE_MAX_TURNS": "the turn cap of spillstore.loop (run_loop, the framework guards)",
    "SPILLSTORE_ORACLE_EXAMPLES": "test suite: examples of the reference-model oracle",
    "SPILLSTORE_DIFF_EXAMPLES": "test suite: examples of the differential tests",
    "SPILLSTORE_DIFF_JSON_ITEMS": "test suite: JSON items of the differential query test",
    "SPILLSTORE_JQ_EXAMPLES": "test suite: examples of the jq differential test",
}
"""``SPILLSTORE_*`` variables that are not settings but are read by spillstore or its test
suite: :class:`Settings` accepts them in the environment. Add a new one here."""

OTHER_ENV_PREFIXES: Final = ("SPILLSTORE_HEADER_",)
"""Prefixes of ``SPILLSTORE_*`` variables that are not settings: ``SPILLSTORE_HEADER_<NAME>``
holds a remote MCP server's header for ``mcp proxy --header-env`` (``install`` writes them)."""

_SESSION_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", re.ASCII)


def env_var_name(field: str) -> str:
    """Return the environment variable that sets ``field``."""
    return f"{_ENV_PREFIX}{field.upper()}"


def field_label(field: str) -> str:
    """Return how messages name a field: ``max_bytes (env SPILLSTORE_MAX_BYTES)``."""
    return f"{field} (env {env_var_name(field)})"


@contextmanager
def _config_errors() -> Iterator[None]:
    """Translate pydantic's ``ValidationError`` into one ``ConfigError``.

    pydantic-settings names only the field in its errors; the message built here names
    the environment variable too, and keeps every problem when there are several. The
    error's ``field`` and ``env_var`` attributes describe the first problem.
    """
    try:
        yield
    except ValidationError as exc:
        problems = [_describe(error) for error in exc.errors()]
        if len(problems) == 1:
            message, field = problems[0]
        else:
            message = f"{len(problems)} invalid settings:\n" + "\n".join(
                f"  {text}" for text, _ in problems
            )
            field = problems[0][1]
        env_var = env_var_name(field) if field in Settings.model_fields else None
        raise ConfigError(message, field=field, env_var=env_var) from exc


def _describe(error: ErrorDetails) -> tuple[str, str | None]:
    """Return the message and field name for one pydantic error."""
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, ConfigError) and cause.field is not None:
        return str(cause), cause.field
    loc = error["loc"]
    field = str(loc[0]) if loc else None
    if field is None:
        return error["msg"], None
    if field not in Settings.model_fields:
        return f"{field}: unknown setting", field
    if isinstance(cause, ConfigError):
        return f"{field_label(field)}: {cause}", field
    return f"{field_label(field)}: {error['msg']}; got {shown(error.get('input'))}", field


def fit_previews(max_bytes: int, head_bytes: int, tail_bytes: int) -> tuple[int, int]:
    """``head_bytes`` and ``tail_bytes``, or, when they do not fit ``max_bytes`` with the
    pointer reserve, the room split 4:1 between them."""
    room = max_bytes - POINTER_RESERVE_BYTES
    if head_bytes + tail_bytes <= room:
        return head_bytes, tail_bytes
    head = room * 4 // 5
    return head, room - head


def _fitted_previews(data: Mapping[str, Any]) -> dict[str, int]:
    """Sizes for the previews ``data`` does not set, when the defaults would not fit its
    ``max_bytes``: both unset share the room (:func:`fit_previews`); one unset takes the
    room the other leaves. Empty when the defaults fit, or when a size is invalid or
    leaves no room (the checks then say why).
    """
    unset = [name for name in ("head_bytes", "tail_bytes") if name not in data]
    try:
        budget = parse_size(data["max_bytes"])
        room = budget - POINTER_RESERVE_BYTES
        room -= sum(parse_size(data[name]) for name in ("head_bytes", "tail_bytes") if name in data)
    except ConfigError:
        return {}
    if (
        len(unset) == 2
        and MIN_BUDGET_BYTES
        <= budget
        < DEFAULT_HEAD_BYTES + DEFAULT_TAIL_BYTES + POINTER_RESERVE_BYTES
    ):
        head, tail = fit_previews(budget, DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES)
        return {"head_bytes": head, "tail_bytes": tail}
    defaults = {"head_bytes": DEFAULT_HEAD_BYTES, "tail_bytes": DEFAULT_TAIL_BYTES}
    if len(unset) == 1 and 0 < room < defaults[unset[0]]:
        return {unset[0]: room}
    return {}


def _fitted_tail(data: Mapping[str, Any]) -> dict[str, int]:
    """The retained tail for a ``retention_bytes`` at or under the default tail, when
    ``data`` does not set the tail: a tenth of the retention (the default's ratio, 1 MiB
    of 10 MiB in the design). Empty otherwise, or when the retention is invalid or off
    (the checks then say why)."""
    if "retained_tail_bytes" in data:
        return {}
    try:
        retention = parse_size(data["retention_bytes"], allow_off=True)
    except ConfigError:
        return {}
    if retention is None or not MIN_RETENTION_BYTES <= retention <= DEFAULT_RETAINED_TAIL_BYTES:
        return {}
    return {"retained_tail_bytes": retention // 10}


def _check_environment(environ: Mapping[str, str], fields: Mapping[str, object]) -> None:
    """Refuse a ``SPILLSTORE_*`` variable that is neither a setting nor a known other name.

    Names match case-insensitively, as pydantic-settings matches the settings' own.

    Raises:
        ConfigError: naming the variable (``env_var``) and the closest known name.
    """
    settings = {env_var_name(field) for field in fields}
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith(_ENV_PREFIX)
        and name.upper() not in settings
        and name.upper() not in OTHER_ENV_VARS
        and not name.upper().startswith(OTHER_ENV_PREFIXES)
    )
    if not unknown:
        return
    known = sorted(settings | set(OTHER_ENV_VARS))
    close = difflib.get_close_matches(unknown[0].upper(), known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    others = f"; also unknown: {', '.join(map(shown, unknown[1:]))}" if unknown[1:] else ""
    raise ConfigError(
        f"unknown environment variable {shown(unknown[0])}{hint}{others}: not a setting"
        f" (the settings: {', '.join(sorted(settings))}); unset it or fix its name",
        env_var=unknown[0],
    )


def _check(condition: bool, field: str, message: str) -> None:
    """Raise a ``ConfigError`` on ``field`` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message, field=field, env_var=env_var_name(field))


class Settings(BaseSettings):
    """spillstore's configuration: frozen, keyword-only, validated when built.

    Values come from keyword arguments, then ``SPILLSTORE_<FIELD>`` environment
    variables, then the defaults. Size fields accept ints and human sizes (see
    :func:`parse_size`); ``retention_bytes`` and ``max_line_bytes`` also take ``"off"``
    or ``None``.

    Raises:
        ConfigError: for an unknown key, a bad value or an inconsistent combination,
            naming the field(s) and environment variable(s).
    """

    model_config = SettingsConfigDict(
        env_prefix=_ENV_PREFIX,
        extra="forbid",
        frozen=True,
    )

    max_bytes: int = Field(
        default=50_000,
        description="The inline budget: the most bytes of text the model sees for one "
        f"tool result, pointer included. At least {MIN_BUDGET_BYTES}.",
    )
    head_bytes: int = Field(
        default=DEFAULT_HEAD_BYTES,
        description="Bytes of the start of an oversized output shown as the head preview; "
        "when unset and max_bytes is small, what fits.",
    )
    tail_bytes: int = Field(
        default=DEFAULT_TAIL_BYTES,
        description="Bytes of the end of an oversized output shown as the tail preview; "
        "when unset and max_bytes is small, what fits.",
    )
    max_line_bytes: int | None = Field(
        default=2_000,
        description="Lines longer than this are cut with a marker (cosmetic); "
        f'"off"/None turns the cut off. At least {MIN_MAX_LINE_BYTES} when on.',
    )
    retention_bytes: int | None = Field(
        default=256 * 1024**2,
        description="The most bytes of one output that are stored (the local store "
        "streams spills to disk with flat memory, so this only bounds disk use); "
        f'"off"/None keeps everything. At least {MIN_RETENTION_BYTES} when on.',
    )
    retained_tail_bytes: int = Field(
        default=DEFAULT_RETAINED_TAIL_BYTES,
        description="When an output exceeds retention_bytes, its last this-many bytes "
        "are stored too. Must be less than retention_bytes.",
    )
    dir: Path | None = Field(
        default=None,
        description="The store root; None means platformdirs' user cache directory "
        "(resolved by the store, not here).",
    )
    store: str | None = Field(
        default=None,
        description="A store URL: PATH, file://PATH, s3://BUCKET/PREFIX or memory://; wins "
        "over dir when both come from the same place (see spillstore._stores.url).",
    )
    s3_endpoint: str | None = Field(default=None, description="S3 endpoint (else AWS_*).")
    s3_region: str | None = Field(default=None, description="S3 region (else AWS_REGION).")
    s3_allow_http: bool | None = Field(default=None, description="Allow an http:// endpoint.")
    session: str = Field(
        default="default",
        description="The session name spills are grouped under: 1-64 characters from "
        'A-Z a-z 0-9 . _ -, starting with a letter or digit, without "..".',
    )

    def __init__(self, **values: Any) -> None:
        """Build settings from keyword arguments, the environment and the defaults.

        Raises:
            ConfigError: see the class docstring.
        """
        # pydantic-settings also takes `_env_file=`, `_case_sensitive=` ... and matches
        # field names case-insensitively (MAX_BYTES=1 would set max_bytes), so anything
        # that is not exactly a field name is refused here.
        fields = type(self).model_fields
        unknown = sorted(key for key in values if key not in fields)
        if unknown:
            close = difflib.get_close_matches(unknown[0].lower(), fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"unknown setting {shown(unknown[0])}{hint}; known settings: {', '.join(fields)}"
                + (f"; also unknown: {', '.join(map(repr, unknown[1:]))}" if unknown[1:] else ""),
                field=unknown[0],
            )
        _check_environment(os.environ, fields)
        with _config_errors():
            super().__init__(**values)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> Self:
        """Build settings from a mapping of field names to values, e.g. a config file.

        The mapping counts as explicit arguments: it beats the environment, and fields
        it does not name still come from the environment or the defaults.

        Raises:
            ConfigError: for a non-string or unknown key, or as the constructor does.
        """
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"settings must be a mapping; got {shown(mapping)}")
        bad_keys = [key for key in mapping if not isinstance(key, str)]
        if bad_keys:
            raise ConfigError(f"setting names must be strings; got {shown(bad_keys[0])}")
        return cls(**mapping)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments beat the environment, which beats the defaults; nothing else."""
        return (init_settings, env_settings)

    @model_validator(mode="before")
    @classmethod
    def _fit_previews(cls, data: Any) -> Any:
        """Shrink the previews nobody set so that a small ``max_bytes`` works alone, and
        the retained tail nobody set so that a small ``retention_bytes`` does."""
        if isinstance(data, dict) and "max_bytes" in data:
            data = {**data, **_fitted_previews(data)}
        if isinstance(data, dict) and "retention_bytes" in data:
            data = {**data, **_fitted_tail(data)}
        return data

    @field_validator(*_SIZE_FIELDS, mode="before")
    @classmethod
    def _parse_size(cls, value: object, info: ValidationInfo) -> int | None:
        """Parse a size; the caps ``"off"`` or ``None`` turn off are the optional fields."""
        size = parse_size(value, allow_off=info.field_name in _OFF_FIELDS)
        stored = info.field_name in _STORED_FIELDS
        return at_most(size, MAX_STORED_BYTES if stored else MAX_INLINE_BYTES)

    @field_validator("dir", mode="before")
    @classmethod
    def _parse_dir(cls, value: object) -> Path | None:
        """Accept ``None``, a non-empty string or an ``os.PathLike[str]``; expand ``~``."""
        if value is None:
            return None
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str):
            raise ConfigError(f"must be a path; got {shown(value)}")
        if not value.strip():
            raise ConfigError(
                f"must be a non-empty path (unset {env_var_name('dir')} to use the default "
                f"cache directory); got {shown(value)}"
            )
        return Path(value).expanduser()

    @field_validator("session", mode="before")
    @classmethod
    def _check_session(cls, value: object) -> str:
        """Accept a short, path-safe session name."""
        if not isinstance(value, str) or _SESSION_NAME.fullmatch(value) is None or ".." in value:
            raise ConfigError(
                "must be 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter "
                f'or digit and not containing ".."; got {shown(value)}'
            )
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        """Refuse combinations that would break the budget or retention guarantees."""
        _check(
            self.max_bytes >= MIN_BUDGET_BYTES,
            "max_bytes",
            f"{field_label('max_bytes')}: must be at least {MIN_BUDGET_BYTES} bytes so the "
            f"pointer notice fits; got {self.max_bytes}",
        )
        if self.max_line_bytes is not None:
            _check(
                self.max_line_bytes >= MIN_MAX_LINE_BYTES,
                "max_line_bytes",
                f"{field_label('max_line_bytes')}: must be at least {MIN_MAX_LINE_BYTES} bytes "
                f'(or "off"); got {self.max_line_bytes}',
            )
        if self.retention_bytes is not None:
            _check(
                self.retention_bytes >= MIN_RETENTION_BYTES,
                "retention_bytes",
                f"{field_label('retention_bytes')}: must be at least {MIN_RETENTION_BYTES} "
                f'bytes (or "off"); got {self.retention_bytes}',
            )
            _check(
                self.retained_tail_bytes < self.retention_bytes,
                "retained_tail_bytes",
                f"{field_label('retained_tail_bytes')}: must be less than "
                f"{field_label('retention_bytes')}; got {self.retained_tail_bytes} >= "
                f"{self.retention_bytes}",
            )
        needed = self.head_bytes + self.tail_bytes + POINTER_RESERVE_BYTES
        _check(
            needed <= self.max_bytes,
            "max_bytes",
            f"{field_label('head_bytes')} + {field_label('tail_bytes')} + {POINTER_RESERVE_BYTES} "
            f"bytes reserved for the pointer must fit in {field_label('max_bytes')}; got "
            f"{self.head_bytes} + {self.tail_bytes} + {POINTER_RESERVE_BYTES} = {needed} "
            f"> {self.max_bytes} (leave the previews unset and they shrink to fit)",
        )
        return self
