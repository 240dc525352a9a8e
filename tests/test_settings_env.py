"""Unknown ``SPILLSTORE_*`` variables are refused with the closest name; the others pass.

Design §9: unknown keys are rejected, never silently ignored. pydantic-settings alone
looks up only the variables of known fields, so ``Settings`` checks the environment
itself, against the settings' variables and the one list of other names spillstore
reads (``OTHER_ENV_VARS``, ``OTHER_ENV_PREFIXES``).
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spillstore import Settings, TruncationService
from spillstore._errors import ConfigError
from spillstore._settings import OTHER_ENV_PREFIXES, OTHER_ENV_VARS

ROOT = Path(__file__).resolve().parent.parent


def test_a_misspelt_setting_variable_is_refused_with_a_suggestion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPILLSTORE_MAX_BYTE=2000 is an error naming it and SPILLSTORE_MAX_BYTES."""
    monkeypatch.setenv("SPILLSTORE_MAX_BYTE", "2000")

    with pytest.raises(ConfigError, match="did you mean SPILLSTORE_MAX_BYTES") as caught:
        Settings()
    assert caught.value.env_var == "SPILLSTORE_MAX_BYTE"
    assert "'SPILLSTORE_MAX_BYTE'" in str(caught.value)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (str(again), again.env_var) == (str(caught.value), "SPILLSTORE_MAX_BYTE")


def test_an_unknown_variable_is_refused_even_when_every_value_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Explicit arguments do not hide a typo in the environment; lower case is caught too."""
    monkeypatch.setenv("spillstore_sesion", "x")

    with pytest.raises(ConfigError, match="did you mean SPILLSTORE_SESSION"):
        Settings(max_bytes=4096, session="s")
    with pytest.raises(ConfigError, match="spillstore_sesion"):
        TruncationService(settings=None)


def test_several_unknown_variables_are_all_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every unknown name is in the message, the first as the error's env_var."""
    monkeypatch.setenv("SPILLSTORE_ZZZ", "1")
    monkeypatch.setenv("SPILLSTORE_AAA", "1")

    with pytest.raises(ConfigError, match="also unknown: 'SPILLSTORE_ZZZ'") as caught:
        Settings()
    assert caught.value.env_var == "SPILLSTORE_AAA"


@pytest.mark.parametrize(
    "name",
    [
        *OTHER_ENV_VARS,
        "SPILLSTORE_HEADER_AUTHORIZATION",
        "SPILLSTORE_HEADER_X_SPILL_TOKEN",
        "SPILLSTORE_STORE",
        "SPILLSTORE_S3_REGION",
        "spillstore_max_turns",
    ],
)
def test_names_spillstore_reads_that_are_not_settings_pass(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn cap, the proxy's header variables, the test switches and the settings pass."""
    monkeypatch.setenv(name, "us-east-1" if "REGION" in name else "7")

    Settings()


def test_every_spillstore_name_in_the_project_is_a_setting_or_listed() -> None:
    """Each SPILLSTORE_ name the code, tests, benchmarks, examples, CI and README use is
    accepted (a new switch must be added to OTHER_ENV_VARS, or it would be refused)."""
    settings = {f"SPILLSTORE_{field.upper()}" for field in Settings.model_fields}
    found: set[str] = set()
    places = ["spillstore", "tests", "benchmarks", "examples", ".ci"]
    files = [ROOT / "README.md", *(p for d in places for p in (ROOT / d).rglob("*") if p.is_file())]
    for path in files:
        if path.suffix not in {".py", ".md", ".sh", ".toml", ".yml", ".yaml", ""}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found.update(re.findall(r"\bSPILLSTORE_[A-Z][A-Z0-9_]*[A-Z0-9]", text))
    allowed = settings | set(OTHER_ENV_VARS)
    left = {
        name
        for name in found - allowed
        if not name.startswith(OTHER_ENV_PREFIXES) and f"{name}_" not in OTHER_ENV_PREFIXES
    }
    # Names the tests use on purpose as unknown (typos) or as a secret jq must not see.
    assert left <= {
        "SPILLSTORE_MAX_BYTE",
        "SPILLSTORE_MAX_BYTS",
        "SPILLSTORE_TEST_SECRET",
        "SPILLSTORE_AAA",
        "SPILLSTORE_ZZZ",
    }, left


@pytest.mark.parametrize(
    "args",
    [["ls"], ["mcp", "serve"], ["mcp", "proxy", "--", sys.executable, "-c", "pass"]],
    ids=["ls", "mcp-serve", "mcp-proxy"],
)
def test_the_command_line_reports_an_unknown_variable_in_one_line(
    args: list[str], tmp_path: Path
) -> None:
    """`spillstore ls`, `mcp serve` and `mcp proxy` exit 2 with one line, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SPILLSTORE_")}
    env.update(SPILLSTORE_DIR=str(tmp_path / "store"), SPILLSTORE_MAX_BYTE="2000")
    result = subprocess.run(
        [sys.executable, "-m", "spillstore._cli", *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
        check=False,
    )
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "SPILLSTORE_MAX_BYTE" in err and "did you mean SPILLSTORE_MAX_BYTES?" in err
