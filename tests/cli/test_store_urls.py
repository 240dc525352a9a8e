"""Store URLs (``--store`` / ``SPILLSTORE_STORE``) and ``~`` in store paths.

The S3 tests run real processes against moto's S3 server on 127.0.0.1
(``tests/stores/s3_server.py``): one process writes a spill, another reads it back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from spillstore import LocalStore, MemoryStore, Settings
from spillstore._errors import ConfigError
from spillstore._stores.url import open_store_url, store_for
from spillstore.mcp.convert import SPILL_META_KEY
from tests.stores.s3_server import BUCKET, CREDENTIALS, REGION, moto_endpoint, prefix_for

ROOT = Path(__file__).resolve().parents[2]
BIG = [sys.executable, str(ROOT / "tests" / "mcp" / "mcp_servers" / "big.py")]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spillstore._cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def s3_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that reaches the moto server through store settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPILLSTORE_", "AWS_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        "SPILLSTORE_S3_ENDPOINT": moto_endpoint(),
        "SPILLSTORE_S3_REGION": REGION,
        "SPILLSTORE_S3_ALLOW_HTTP": "true",
        "SPILLSTORE_STORE": f"s3://{BUCKET}/{prefix_for(tmp_path)}",
        "PYTHONPATH": str(ROOT),
    }
    return env


# --------------------------------------------------------------------------- parsing


def test_paths_and_file_urls_open_a_local_store_with_tilde_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PATH``, ``~/PATH``, ``file:///PATH``, ``file://localhost/PATH`` and
    ``file://~/PATH`` (percent-decoded) all name the same local root."""
    monkeypatch.setenv("HOME", str(tmp_path))
    want = str(tmp_path / "sp ill")
    for url in (
        want,
        "~/sp ill",
        f"file://{want}",
        f"file://localhost{want}",
        "file://~/sp%20ill",
    ):
        store = open_store_url(url)
        assert isinstance(store, LocalStore)
        assert str(store.root) == want, url


def test_memory_url_opens_a_fresh_memory_store() -> None:
    """``memory://`` is a new in-memory store each time."""
    first, second = open_store_url("memory://"), open_store_url("MEMORY://")
    assert isinstance(first, MemoryStore) and isinstance(second, MemoryStore)
    assert first is not second


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("", "non-empty"),
        ("   ", "non-empty"),
        ("a\0b", "non-empty"),
        ("ftp://host/x", "unknown scheme 'ftp'"),
        ("memory://x", "nothing after"),
        ("s3://", "s3://BUCKET"),
        ("s3:///prefix", "s3://BUCKET"),
        ("s3://bucket/p?x=1", "s3://BUCKET"),
        ("file://example.com/x", "not the host"),
        ("file://relative", "not the host"),
        ("file:///x?y", "no query"),
        ("file:///tmp/a%00b", "NUL"),
        ("file://~/a%00b", "NUL"),
    ],
)
def test_bad_store_urls_are_config_errors_naming_the_setting(url: str, why: str) -> None:
    """A bad URL is a ConfigError naming ``store`` and ``SPILLSTORE_STORE``, with the
    forms that work."""
    with pytest.raises(ConfigError, match="SPILLSTORE_STORE") as caught:
        open_store_url(url)
    assert why in str(caught.value)
    assert caught.value.field == "store"
    assert "s3://BUCKET/PREFIX" in str(caught.value)


def test_a_file_url_scheme_is_case_insensitive(tmp_path: Path) -> None:
    """``FILE:///path`` is a local store at the path, like ``file:///path`` (URL schemes
    are case-insensitive, as ``S3://`` already was)."""
    store = open_store_url(f"FILE://{tmp_path / 'spills'}")
    assert isinstance(store, LocalStore) and store.root == str(tmp_path / "spills")


def test_s3_url_names_bucket_and_prefix(tmp_path: Path) -> None:
    """``s3://BUCKET/PREFIX/`` opens an S3 store on that bucket and prefix (endpoint,
    region and plain HTTP from the settings), and it stores and reads on moto."""
    prefix = prefix_for(tmp_path)
    settings = Settings(
        store=f"s3://{BUCKET}/{prefix}/",
        s3_endpoint=moto_endpoint(),
        s3_region=REGION,
        s3_allow_http=True,
    )
    os.environ.setdefault("AWS_ACCESS_KEY_ID", CREDENTIALS["access_key_id"])
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret_access_key"])
    store = store_for(settings)
    assert type(store).__name__ == "S3Store"
    meta = store.put(["hello\n"], session="s", tool_name="t", tool_call_id="c")
    assert store.read_bytes(meta.spill_id, 0, 6) == b"hello\n"


def test_settings_expand_tilde_in_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SPILLSTORE_DIR='~/x'`` and ``dir="~/x"`` mean the home directory's ``x``, never a
    literal ``~`` directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SPILLSTORE_DIR", "~/from-env")
    assert Settings().dir == tmp_path / "from-env"
    assert Settings(dir="~/given").dir == tmp_path / "given"
    store = store_for(Settings())
    assert isinstance(store, LocalStore) and store.root == str(tmp_path / "from-env")


# --------------------------------------------------------------------------- command line


def test_cli_dir_expands_tilde_and_beats_the_store_variable(tmp_path: Path) -> None:
    """``--dir '~/x'`` (quoted: no shell expanded it) writes under the home directory,
    and a ``--dir`` given on the command line wins over ``$SPILLSTORE_STORE``."""
    env = {**os.environ, "HOME": str(tmp_path), "SPILLSTORE_STORE": "memory://"}
    done = cli("--dir", "~/spills", "run", "--max-bytes", "3000", "--", "seq", "5000", env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "spills").is_dir() and not (ROOT / "~").exists()
    listed = cli("--json", "ls", "--dir", "~/spills", env=env)
    assert len(json.loads(listed.stdout)["spills"]) == 1


def test_cli_refuses_dir_and_store_together_and_bad_urls(tmp_path: Path) -> None:
    """``--dir`` with ``--store`` is a usage error (exit 2), and so is a bad URL."""
    both = cli("ls", "--dir", str(tmp_path), "--store", "memory://")
    assert both.returncode == 2 and "not both" in both.stderr
    bad = cli("ls", "--store", "gopher://x")
    assert bad.returncode == 2 and "unknown scheme 'gopher'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_cli_commands_share_spills_through_an_s3_url(tmp_path: Path) -> None:
    """``run`` in one process spills to ``s3://``; ``ls`` and ``read`` in others find it."""
    env = s3_env(tmp_path)
    done = cli("--json", "run", "--max-bytes", "3000", "--", "seq", "20000", env=env)
    assert done.returncode == 0, done.stderr
    spill = json.loads(done.stdout)["spill"]
    assert spill["saved"] == "full"
    listed = cli("--json", "ls", env=env)
    assert [s["spill_id"] for s in json.loads(listed.stdout)["spills"]] == [spill["spill_id"]]
    page = cli("read", spill["spill_id"], "--offset", "19999", "--limit", "2", env=env)
    assert page.returncode == 0, page.stderr
    assert "19999" in page.stdout and "20000" in page.stdout


@pytest.mark.anyio
async def test_mcp_proxy_on_s3_spills_where_a_second_process_reads(tmp_path: Path) -> None:
    """``spillstore mcp proxy --store s3://...`` spills a big result to moto; a second
    process (``spillstore read``) reads the same bytes back by spill id."""
    env = s3_env(tmp_path)
    url = env.pop("SPILLSTORE_STORE")
    command = [sys.executable, "-m", "spillstore._cli", "mcp", "proxy", "--store", url]
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "--max-bytes", "20000", "--", *BIG],
        cwd=str(ROOT),
        env=env,
    )
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("big", {"size": 300_000})
    spill = (result.meta or {})[SPILL_META_KEY]
    assert spill["saved"] == "full"
    [text] = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert spill["spillId"] in text
    page = cli(
        "--store",
        url,
        "read",
        spill["spillId"],
        "--byte-offset",
        "0",
        "--max-bytes",
        "100",
        env=env,
    )
    assert page.returncode == 0, page.stderr
    assert "00000000 xxx" in page.stdout


@pytest.mark.parametrize(
    "endpoint",
    ["not a url", "http://", "http://[::1", "http://127.0.0.1:99999", "ftp://host", " "],
)
def test_a_malformed_s3_endpoint_is_one_error_line(endpoint: str) -> None:
    """A malformed S3 endpoint (from ``SPILLSTORE_S3_ENDPOINT`` or ``AWS_ENDPOINT_URL``)
    is refused in one line naming it, exit 2; obstore panicked on it (a Rust panic, not
    an ``Exception``: a traceback from the CLI, a dead proxy)."""
    for variable in ("SPILLSTORE_S3_ENDPOINT", "AWS_ENDPOINT_URL"):
        env = {**os.environ, "SPILLSTORE_STORE": "s3://bucket/p", variable: endpoint}
        env.pop("SPILLSTORE_S3_ENDPOINT" if variable == "AWS_ENDPOINT_URL" else "X", None)
        done = cli("ls", env=env)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
        assert "invalid S3 endpoint" in done.stderr


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SPILLSTORE_STORE", "s3://b b/p", "bucket"),
        ("SPILLSTORE_S3_REGION", "us\neast-1", "region"),
        ("AWS_SESSION_TOKEN", "tok\x01en", "credential $AWS_SESSION_TOKEN"),
        ("AWS_SECRET_ACCESS_KEY", "sec ret", "credential $AWS_SECRET_ACCESS_KEY"),
    ],
)
def test_s3_settings_obstore_would_panic_on_are_one_error_line(
    variable: str, value: str, named: str
) -> None:
    """A bucket, region or credential with spaces or control characters is refused when
    the store is made, naming it but never showing a secret (obstore panicked on them in
    a request: a proxy died with its upstream's tools)."""
    env = {
        **os.environ,
        "SPILLSTORE_STORE": "s3://bucket/p",
        "SPILLSTORE_S3_ENDPOINT": "http://127.0.0.1:9",
        variable: value,
    }
    done = cli("ls", env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"invalid S3 {named}" in done.stderr
    assert "ret" not in done.stderr and "tok" not in done.stderr
