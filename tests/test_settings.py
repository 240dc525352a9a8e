"""Tests for spillstore._settings: sizes, durations, precedence and validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from spillstore._errors import ConfigError
from spillstore._settings import (
    MAX_INLINE_BYTES,
    MAX_STORED_BYTES,
    MIN_BUDGET_BYTES,
    MIN_MAX_LINE_BYTES,
    MIN_RETENTION_BYTES,
    POINTER_RESERVE_BYTES,
    Settings,
    parse_duration,
    parse_size,
)

SIZE_FIELDS = [
    "max_bytes",
    "head_bytes",
    "tail_bytes",
    "max_line_bytes",
    "retention_bytes",
    "retained_tail_bytes",
]
OFF_FIELDS = ["max_line_bytes", "retention_bytes"]
ALWAYS_ON_FIELDS = [field for field in SIZE_FIELDS if field not in OFF_FIELDS]

# Values no size setting accepts (None is added for the fields that cannot be off).
BAD_SIZE_VALUES: list[object] = [
    0,
    -1,
    1.5,
    5.0,
    True,
    False,
    float("nan"),
    float("inf"),
    "0",
    "-1",
    "1.5",
    "5.0",
    "nan",
    "inf",
    "lots",
    "",
    "   ",
    "1.5MB",
    "10K",
    "10k",
    "10M",
    "10G",
    "10 XB",
    "0KB",
    "+5",
    "5_000",
    "50,000",
    "True",
    "None",
    "null",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: int() would accept it
    b"50",
    [50],
]
# The same values as an environment variable would carry them.
BAD_SIZE_ENV_VALUES = [
    "0",
    "-1",
    "1.5",
    "5.0",
    "True",
    "False",
    "nan",
    "inf",
    "lots",
    "",
    "1.5MB",
    "10K",
    "None",
    "null",
]


def env_var(field: str) -> str:
    """Return the environment variable the tests expect for ``field``."""
    return f"SPILLSTORE_{field.upper()}"


def assert_names_field(error: ConfigError, field: str) -> None:
    """Assert that ``error`` names ``field`` and its environment variable."""
    assert field in str(error)
    assert env_var(field) in str(error)
    assert error.field == field
    assert error.env_var == env_var(field)


# --- defaults, shape and precedence -------------------------------------------------------


def test_defaults() -> None:
    """With no arguments and no environment, every field has its documented default."""
    settings = Settings()

    assert settings.max_bytes == 50_000
    assert settings.head_bytes == 4_096
    assert settings.tail_bytes == 1_024
    assert settings.max_line_bytes == 2_000
    assert settings.retention_bytes == 256 * 1024 * 1024
    assert settings.retained_tail_bytes == 1024 * 1024
    assert settings.dir is None
    assert settings.session == "default"


def test_every_field_is_documented() -> None:
    """Every field carries a description."""
    for name, info in Settings.model_fields.items():
        assert info.description, name


def test_frozen() -> None:
    """Settings cannot be changed after they are built."""
    settings = Settings()

    with pytest.raises(ValidationError):
        settings.max_bytes = 1


def test_hashable_and_equal_by_value() -> None:
    """Equal settings are equal and hash alike, so they can key a cache."""
    assert Settings(max_bytes="60KB") == Settings(max_bytes=60_000)
    assert hash(Settings(max_bytes="60KB")) == hash(Settings(max_bytes=60_000))
    assert len({Settings(), Settings()}) == 1


def test_keyword_only() -> None:
    """Positional arguments are refused, including pydantic-settings' own `_case_sensitive`."""
    with pytest.raises(TypeError):
        Settings(True)  # type: ignore[call-arg]


def test_environment_beats_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SPILLSTORE_* variable replaces the default."""
    monkeypatch.setenv("SPILLSTORE_MAX_BYTES", "60000")
    monkeypatch.setenv("SPILLSTORE_SESSION", "from-env")
    monkeypatch.setenv("SPILLSTORE_DIR", "/tmp/spill-env")

    settings = Settings()

    assert settings.max_bytes == 60_000
    assert settings.session == "from-env"
    assert settings.dir == Path("/tmp/spill-env")


def test_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit keyword argument replaces the environment variable."""
    monkeypatch.setenv("SPILLSTORE_MAX_BYTES", "60000")
    monkeypatch.setenv("SPILLSTORE_SESSION", "from-env")

    settings = Settings(max_bytes=70_000, session="from-arg")

    assert settings.max_bytes == 70_000
    assert settings.session == "from-arg"


def test_explicit_none_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passing None explicitly turns a cap off (or picks the default dir) despite the env."""
    monkeypatch.setenv("SPILLSTORE_RETENTION_BYTES", "5MiB")
    monkeypatch.setenv("SPILLSTORE_MAX_LINE_BYTES", "100")
    monkeypatch.setenv("SPILLSTORE_DIR", "/tmp/spill-env")

    settings = Settings(retention_bytes=None, max_line_bytes=None, dir=None)

    assert settings.retention_bytes is None
    assert settings.max_line_bytes is None
    assert settings.dir is None


def test_environment_fills_fields_not_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields not passed as arguments still come from the environment."""
    monkeypatch.setenv("SPILLSTORE_HEAD_BYTES", "2KiB")

    settings = Settings(max_bytes="60KB")

    assert settings.max_bytes == 60_000
    assert settings.head_bytes == 2_048


def test_environment_names_match_case_insensitively(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic-settings matches variable names case-insensitively, so lower case works."""
    monkeypatch.setenv("spillstore_max_bytes", "60000")

    assert Settings().max_bytes == 60_000


def test_dotenv_file_is_not_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A .env file in the working directory is not a settings source."""
    (tmp_path / ".env").write_text("SPILLSTORE_MAX_BYTES=60000\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    assert Settings().max_bytes == 50_000


# --- human sizes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50000", 50_000),
        ("1", 1),
        ("007", 7),
        ("512B", 512),
        ("512b", 512),
        ("50KB", 50_000),
        ("50kB", 50_000),
        ("50kb", 50_000),
        ("50Kb", 50_000),
        ("50 KB", 50_000),
        ("2MB", 2_000_000),
        ("2mb", 2_000_000),
        ("3GB", 3_000_000_000),
        ("4KiB", 4_096),
        ("4kib", 4_096),
        ("4KIB", 4_096),
        ("4 KiB", 4_096),
        ("10MiB", 10_485_760),
        ("10mib", 10_485_760),
        ("1GiB", 1_073_741_824),
        ("1gib", 1_073_741_824),
    ],
)
def test_parse_size_human_forms(text: str, expected: int) -> None:
    """Every accepted unit parses to an int, case-insensitively and with an optional space."""
    assert parse_size(text) == expected
    assert type(parse_size(text)) is int
    assert parse_size(text, allow_off=True) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [(" 123 ", 123), ("\t123\n", 123), ("  50KB  ", 50_000), (" 10 \t MiB ", 10_485_760)],
)
def test_parse_size_surrounding_whitespace(text: str, expected: int) -> None:
    """Whitespace around the value, and between number and unit, is ignored."""
    assert parse_size(text) == expected


def test_parse_size_accepts_positive_ints() -> None:
    """A positive int is returned as it is, however large."""
    assert parse_size(1) == 1
    assert parse_size(50_000) == 50_000
    assert parse_size(10**15) == 10**15


@pytest.mark.parametrize("value", BAD_SIZE_VALUES)
@pytest.mark.parametrize("allow_off", [False, True])
def test_parse_size_rejections(value: object, allow_off: bool) -> None:
    """Zero, negatives, bools, floats, fractions, words and ambiguous units are refused."""
    with pytest.raises(ConfigError) as caught:
        parse_size(value, allow_off=allow_off)

    assert "must be a positive whole number of bytes" in str(caught.value)
    assert f"got {value!r}" in str(caught.value)


@pytest.mark.parametrize("value", [None, "off", "OFF", " Off "])
def test_parse_size_off_needs_allow_off(value: object) -> None:
    """None and "off" turn a cap off only where that is allowed."""
    assert parse_size(value, allow_off=True) is None
    with pytest.raises(ConfigError, match="cannot be turned off"):
        parse_size(value)


@pytest.mark.parametrize(("unit", "letter"), [("K", "K"), ("k", "K"), ("M", "M"), ("g", "G")])
def test_parse_size_bare_letter_suggests_both_units(unit: str, letter: str) -> None:
    """A bare K/M/G is refused with a message offering the 1000- and 1024-based spellings."""
    with pytest.raises(ConfigError) as caught:
        parse_size(f"10{unit}")

    assert f'"10{letter}B"' in str(caught.value)
    assert f'"10{letter}iB"' in str(caught.value)


def test_parse_size_zero_with_allow_off_points_to_off() -> None:
    """Zero is never "off"; the message says how to turn the cap off instead."""
    with pytest.raises(ConfigError, match='write "off", not 0'):
        parse_size(0, allow_off=True)


def test_parse_size_too_many_digits() -> None:
    """A number past Python's int-from-string limit is refused with a ConfigError."""
    with pytest.raises(ConfigError, match="too many digits"):
        parse_size("9" * 5_000)


@given(st.integers(min_value=1, max_value=10**12))
def test_parse_size_round_trips_whole_numbers(n: int) -> None:
    """Any whole number parses to itself, and n KiB to n * 1024."""
    assert parse_size(str(n)) == n
    assert parse_size(f"{n}KiB") == n * 1024


# --- sizes through Settings ---------------------------------------------------------------


def test_settings_accept_human_sizes_from_arguments_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Size fields take human sizes both as arguments and from the environment."""
    monkeypatch.setenv("SPILLSTORE_RETENTION_BYTES", " 20 MiB ")
    monkeypatch.setenv("SPILLSTORE_RETAINED_TAIL_BYTES", "2MiB")

    settings = Settings(max_bytes="100KB", head_bytes="8KiB", tail_bytes=" 2KiB ")

    assert settings.max_bytes == 100_000
    assert settings.head_bytes == 8_192
    assert settings.tail_bytes == 2_048
    assert settings.retention_bytes == 20 * 1024 * 1024
    assert settings.retained_tail_bytes == 2 * 1024 * 1024


def _bad_values_for(field: str) -> list[object]:
    """Return the values ``field`` refuses: all bad sizes, plus None if it cannot be off."""
    return BAD_SIZE_VALUES + ([] if field in OFF_FIELDS else [None, "off"])


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, value) for field in SIZE_FIELDS for value in _bad_values_for(field)],
)
def test_bad_size_argument_names_field_and_env_var(field: str, value: object) -> None:
    """A bad size passed as an argument raises ConfigError naming the field and env var."""
    with pytest.raises(ConfigError) as caught:
        Settings(**{field: value})

    assert_names_field(caught.value, field)
    assert f"got {value!r}" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value.__cause__, ValidationError)


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, value) for field in SIZE_FIELDS for value in BAD_SIZE_ENV_VALUES]
    + [(field, "off") for field in ALWAYS_ON_FIELDS],
)
def test_bad_size_environment_names_field_and_env_var(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    """A bad size in the environment raises ConfigError naming the field and env var."""
    monkeypatch.setenv(env_var(field), value)

    with pytest.raises(ConfigError) as caught:
        Settings()

    assert_names_field(caught.value, field)
    assert f"got {value!r}" in str(caught.value)


@pytest.mark.parametrize("field", OFF_FIELDS)
@pytest.mark.parametrize("value", [None, "off", "OFF", " off "])
def test_caps_turn_off_by_argument(field: str, value: object) -> None:
    """retention_bytes and max_line_bytes take None or "off" as an argument."""
    assert getattr(Settings(**{field: value}), field) is None


@pytest.mark.parametrize("field", OFF_FIELDS)
@pytest.mark.parametrize("value", ["off", "OFF", " Off "])
def test_caps_turn_off_by_environment(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    """retention_bytes and max_line_bytes take "off" from the environment."""
    monkeypatch.setenv(env_var(field), value)

    assert getattr(Settings(), field) is None


def test_several_bad_values_are_reported_together() -> None:
    """When several fields are bad, one error lists them all."""
    with pytest.raises(ConfigError) as caught:
        Settings(max_bytes=0, head_bytes="lots")

    message = str(caught.value)
    assert message.startswith("2 invalid settings")
    assert "SPILLSTORE_MAX_BYTES" in message
    assert "SPILLSTORE_HEAD_BYTES" in message
    assert caught.value.field == "max_bytes"


# --- unknown keys and mappings ------------------------------------------------------------


def test_unknown_key_in_mapping() -> None:
    """An unknown key in a mapping raises ConfigError naming it and suggesting the field."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_mapping({"max_byts": 1})

    assert "'max_byts'" in str(caught.value)
    assert "did you mean 'max_bytes'" in str(caught.value)
    assert caught.value.field == "max_byts"


@pytest.mark.parametrize("key", ["max_byts", "MAX_BYTES", "_env_file", "_case_sensitive"])
def test_unknown_keyword_argument(key: str) -> None:
    """Only exact field names are accepted: no typos, no other case, no pydantic extras."""
    with pytest.raises(ConfigError, match=f"unknown setting {key!r}"):
        Settings(**{key: 1})


def test_mapping_key_must_be_a_string() -> None:
    """A non-string key in a mapping raises ConfigError."""
    with pytest.raises(ConfigError, match="must be strings"):
        Settings.from_mapping({1: 2})  # type: ignore[dict-item]


def test_mapping_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapping counts as explicit arguments; the environment fills what it omits."""
    monkeypatch.setenv("SPILLSTORE_MAX_BYTES", "60000")
    monkeypatch.setenv("SPILLSTORE_SESSION", "from-env")

    settings = Settings.from_mapping({"max_bytes": "70KB"})

    assert settings.max_bytes == 70_000
    assert settings.session == "from-env"


def test_bad_value_in_mapping_names_field_and_env_var() -> None:
    """A bad value in a mapping raises ConfigError naming the field and env var."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_mapping({"tail_bytes": "1.5MB"})

    assert_names_field(caught.value, "tail_bytes")


# --- cross-field checks -------------------------------------------------------------------


def test_budget_below_minimum() -> None:
    """max_bytes below MIN_BUDGET_BYTES is refused even when the previews would fit."""
    with pytest.raises(ConfigError) as caught:
        Settings(max_bytes=MIN_BUDGET_BYTES - 1, head_bytes=1, tail_bytes=1)

    assert_names_field(caught.value, "max_bytes")
    assert str(MIN_BUDGET_BYTES) in str(caught.value)


def test_budget_at_minimum() -> None:
    """max_bytes equal to MIN_BUDGET_BYTES is accepted when the previews fit."""
    settings = Settings(max_bytes=MIN_BUDGET_BYTES, head_bytes=256, tail_bytes=256)

    assert settings.max_bytes == MIN_BUDGET_BYTES


def test_previews_and_pointer_must_fit_the_budget() -> None:
    """head_bytes + tail_bytes + POINTER_RESERVE_BYTES above max_bytes is refused."""
    with pytest.raises(ConfigError) as caught:
        Settings(max_bytes=10_000, head_bytes=8_000, tail_bytes=1_000)

    message = str(caught.value)
    for field in ("max_bytes", "head_bytes", "tail_bytes"):
        assert field in message
        assert env_var(field) in message
    assert str(POINTER_RESERVE_BYTES) in message


def test_previews_and_pointer_exactly_fill_the_budget() -> None:
    """head_bytes + tail_bytes + POINTER_RESERVE_BYTES equal to max_bytes is accepted."""
    settings = Settings(max_bytes=4_096 + 1_024 + POINTER_RESERVE_BYTES)

    assert settings.max_bytes == 6_656


def test_a_small_environment_budget_shrinks_the_default_previews(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A budget from the environment too small for the default previews works alone:
    the previews share what the pointer reserve leaves, 4:1 (as a per-call budget does)."""
    monkeypatch.setenv("SPILLSTORE_MAX_BYTES", "4KiB")

    settings = Settings()

    room = 4_096 - POINTER_RESERVE_BYTES
    assert (settings.head_bytes, settings.tail_bytes) == (room * 4 // 5, room - room * 4 // 5)


def test_one_preview_set_leaves_the_room_to_the_other() -> None:
    """With one preview set, the unset one takes the room left (at most its default)."""
    settings = Settings(max_bytes=4_000, tail_bytes=100)

    assert (settings.head_bytes, settings.tail_bytes) == (4_000 - POINTER_RESERVE_BYTES - 100, 100)
    assert Settings(max_bytes=60_000, head_bytes=50_000).tail_bytes == 1_024


def test_previews_that_were_set_are_never_shrunk() -> None:
    """A preview given explicitly that does not fit is refused, not quietly cut."""
    with pytest.raises(ConfigError) as caught:
        Settings(max_bytes=4_000, head_bytes=3_000)

    assert "head_bytes" in str(caught.value)


@given(st.integers(MIN_BUDGET_BYTES, 8_000))
def test_any_accepted_budget_alone_makes_valid_settings(max_bytes: int) -> None:
    """Every budget from the minimum up builds, the previews filling at most the room,
    and the defaults kept whenever they fit."""
    settings = Settings(max_bytes=max_bytes)

    assert settings.head_bytes + settings.tail_bytes + POINTER_RESERVE_BYTES <= max_bytes
    assert settings.head_bytes >= 4 * settings.tail_bytes - 4 or settings.tail_bytes == 1_024
    if max_bytes >= 4_096 + 1_024 + POINTER_RESERVE_BYTES:
        assert (settings.head_bytes, settings.tail_bytes) == (4_096, 1_024)


def test_retained_tail_must_be_less_than_retention() -> None:
    """retained_tail_bytes equal to or above retention_bytes is refused."""
    with pytest.raises(ConfigError) as caught:
        Settings(retention_bytes="1MiB", retained_tail_bytes="1MiB")

    assert_names_field(caught.value, "retained_tail_bytes")
    assert "SPILLSTORE_RETENTION_BYTES" in str(caught.value)


def test_retained_tail_is_unchecked_when_retention_is_off() -> None:
    """With retention off, retained_tail_bytes may be any positive size."""
    settings = Settings(retention_bytes="off", retained_tail_bytes="1GiB")

    assert settings.retained_tail_bytes == 1024**3


def test_retention_below_minimum() -> None:
    """retention_bytes below MIN_RETENTION_BYTES is refused."""
    with pytest.raises(ConfigError) as caught:
        Settings(retention_bytes=MIN_RETENTION_BYTES - 1, retained_tail_bytes=1)

    assert_names_field(caught.value, "retention_bytes")


def test_retention_at_minimum() -> None:
    """retention_bytes equal to MIN_RETENTION_BYTES is accepted with a smaller tail."""
    settings = Settings(retention_bytes=MIN_RETENTION_BYTES, retained_tail_bytes=1_024)

    assert settings.retention_bytes == MIN_RETENTION_BYTES


def test_line_cut_below_minimum() -> None:
    """max_line_bytes below MIN_MAX_LINE_BYTES is refused; at the minimum it is accepted."""
    with pytest.raises(ConfigError) as caught:
        Settings(max_line_bytes=MIN_MAX_LINE_BYTES - 1)

    assert_names_field(caught.value, "max_line_bytes")
    assert Settings(max_line_bytes=MIN_MAX_LINE_BYTES).max_line_bytes == MIN_MAX_LINE_BYTES


# --- dir and session ----------------------------------------------------------------------


def test_dir_accepts_strings_and_paths(tmp_path: Path) -> None:
    """dir takes a string or an os.PathLike and stores a Path."""
    assert Settings(dir=str(tmp_path)).dir == tmp_path
    assert Settings(dir=tmp_path).dir == tmp_path


@pytest.mark.parametrize("value", ["", "   ", 5, b"/tmp"])
def test_dir_rejections(value: object) -> None:
    """An empty or non-path dir is refused rather than read as the current directory."""
    with pytest.raises(ConfigError) as caught:
        Settings(dir=value)

    assert_names_field(caught.value, "dir")


def test_empty_dir_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty SPILLSTORE_DIR is refused, not silently replaced by the default."""
    monkeypatch.setenv("SPILLSTORE_DIR", "")

    with pytest.raises(ConfigError) as caught:
        Settings()

    assert_names_field(caught.value, "dir")


@pytest.mark.parametrize("name", ["default", "a", "0", "A.b_c-1", "run.2024-01-01", "a" * 64])
def test_session_accepted(name: str) -> None:
    """Session names of 1-64 safe characters starting with a letter or digit are accepted."""
    assert Settings(session=name).session == name


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a..b", "-a", "_a", ".a", "a/b", "a\\b", "a b", "a" * 65, "a\n", "é", 5, None],
)
def test_session_rejected(name: object) -> None:
    """Unsafe or malformed session names are refused, naming the field and env var."""
    with pytest.raises(ConfigError) as caught:
        Settings(session=name)

    assert_names_field(caught.value, "session")


def test_session_rejected_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad SPILLSTORE_SESSION is refused, naming the env var."""
    monkeypatch.setenv("SPILLSTORE_SESSION", "../etc")

    with pytest.raises(ConfigError) as caught:
        Settings()

    assert_names_field(caught.value, "session")


# --- durations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (45, 45.0),
        ("45", 45.0),
        ("30s", 30.0),
        ("10m", 600.0),
        ("2h", 7_200.0),
        ("7d", 604_800.0),
        ("30S", 30.0),
        ("10M", 600.0),
        (" 2 h ", 7_200.0),
        ("\t7d\n", 604_800.0),
    ],
)
def test_parse_duration_forms(value: object, expected: float) -> None:
    """Whole seconds and s/m/h/d durations parse to float seconds."""
    result = parse_duration(value)

    assert result == expected
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        1.5,
        5.0,
        True,
        False,
        float("nan"),
        float("inf"),
        None,
        "0",
        "0s",
        "-5m",
        "1.5h",
        "5.0",
        "nan",
        "inf",
        "lots",
        "",
        "  ",
        "10w",
        "10ms",
        "s",
        "9" * 5_000,
        b"30",
    ],
)
def test_parse_duration_rejections(value: object) -> None:
    """Zero, negatives, bools, floats, fractions, words and unknown units are refused."""
    with pytest.raises(ConfigError) as caught:
        parse_duration(value)

    assert "must be a positive whole number of seconds" in str(caught.value)


def test_parse_duration_too_long_for_a_float() -> None:
    """A duration too large for a float is refused rather than overflowing."""
    with pytest.raises(ConfigError, match="too long"):
        parse_duration(10**400)


@pytest.mark.parametrize(
    ("field", "maximum"),
    [
        ("max_bytes", MAX_INLINE_BYTES),
        ("head_bytes", MAX_INLINE_BYTES),
        ("tail_bytes", MAX_INLINE_BYTES),
        ("max_line_bytes", MAX_INLINE_BYTES),
        ("retention_bytes", MAX_STORED_BYTES),
        ("retained_tail_bytes", MAX_STORED_BYTES),
    ],
)
def test_absurd_sizes_are_refused_naming_the_field_and_the_largest_value(
    field: str, maximum: int
) -> None:
    """A size over its field's maximum raises a ConfigError naming the field and the maximum."""
    with pytest.raises(ConfigError) as info:
        Settings(**{field: 2**63})
    assert info.value.field == field
    assert str(maximum) in str(info.value)


def test_the_largest_inline_budget_is_accepted() -> None:
    """The maximum itself is a valid budget (from an int or a human size)."""
    assert Settings(max_bytes=MAX_INLINE_BYTES).max_bytes == MAX_INLINE_BYTES
    assert Settings(max_bytes="1GiB").max_bytes == MAX_INLINE_BYTES
    assert Settings(retention_bytes=MAX_STORED_BYTES).retention_bytes == MAX_STORED_BYTES


@pytest.mark.parametrize(
    "value",
    [10**4000 - 1, "9" * 5000, "x" * 5000, 7 * 10**4999],
    ids=["int", "digits", "word", "huge"],
)
def test_error_messages_echo_at_most_a_hundred_characters_of_a_bad_value(value: object) -> None:
    """A huge bad value is echoed cut, with its length, never whole."""
    with pytest.raises(ConfigError) as info:
        Settings(max_bytes=value)
    assert len(str(info.value)) < 400


@pytest.mark.parametrize("mapping", [[], None, "8192", 8192, [("max_bytes", 8192)]])
def test_from_mapping_refuses_what_is_not_a_mapping(mapping: object) -> None:
    """Settings.from_mapping raises ConfigError, not TypeError, for a list, None or a str."""
    with pytest.raises(ConfigError, match="settings must be a mapping"):
        Settings.from_mapping(mapping)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("retention", "tail"),
    [("1MB", 100_000), ("4096", 409), ("1MiB", 104_857), ("2MiB", 1024**2), ("off", 1024**2)],
)
def test_a_small_retention_alone_shrinks_the_default_retained_tail(
    monkeypatch: pytest.MonkeyPatch, retention: str, tail: int
) -> None:
    """A retention cap at or under the default retained tail (1 MiB), set alone (as an
    argument or in the environment), keeps a tenth of it as the tail instead of failing
    on a tail nobody set; a larger cap, or none, keeps the default tail."""
    assert Settings(retention_bytes=retention).retained_tail_bytes == tail
    monkeypatch.setenv("SPILLSTORE_RETENTION_BYTES", retention)
    assert Settings().retained_tail_bytes == tail


def test_a_retained_tail_that_was_set_is_never_shrunk() -> None:
    """A tail set with a smaller retention is still refused, naming both settings."""
    with pytest.raises(ConfigError, match=r"retained_tail_bytes.*must be less than"):
        Settings(retention_bytes="1MB", retained_tail_bytes="1MiB")
