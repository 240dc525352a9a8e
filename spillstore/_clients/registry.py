"""The MCP clients spillstore can edit: where each keeps its servers, in which format.

Every path is computed from a :class:`Place` (home, operating system, environment,
working directory), never from the process itself, so tests can lay out a macOS,
Windows or Linux home anywhere. The table, per client and scope:

==============  ========  ==================================================  ===========
client          scope     file                                                section
==============  ========  ==================================================  ===========
claude-code     user      ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR``)          mcpServers
claude-code     local     the same file, under ``projects.CWD``               mcpServers
claude-code     project   ``.mcp.json``                                       mcpServers
claude-desktop  user      ``<config dir>/Claude/claude_desktop_config.json``  mcpServers
cursor          user      ``~/.cursor/mcp.json``                              mcpServers
cursor          project   ``.cursor/mcp.json``                                mcpServers
windsurf        user      ``~/.codeium/windsurf/mcp_config.json``             mcpServers
vscode          user      ``<config dir>/Code/User/mcp.json`` (JSONC)         servers
vscode          project   ``.vscode/mcp.json`` (JSONC)                        servers
gemini          user      ``~/.gemini/settings.json``                         mcpServers
gemini          project   ``.gemini/settings.json``                           mcpServers
codex           user      ``$CODEX_HOME/config.toml`` (``~/.codex``)           [mcp_servers]
codex           project   ``.codex/config.toml``                              [mcp_servers]
zed             user      ``<zed dir>/settings.json`` (JSONC)                 context_servers
zed             project   ``.zed/settings.json`` (JSONC)                      context_servers
opencode        user      ``~/.config/opencode/opencode.json[c]``             mcp.servers
opencode        project   ``[.opencode/]opencode.json[c]``                    mcp.servers
goose           user      ``<goose dir>/config.yaml`` (YAML)                  extensions
==============  ========  ==================================================  ===========

``<config dir>`` is ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on Windows
and ``$XDG_CONFIG_HOME`` (else ``~/.config``) elsewhere. ``<goose dir>`` is
``$GOOSE_PATH_ROOT/config`` when that is set, else ``%APPDATA%\\Block\\goose\\config``
on Windows, ``$XDG_CONFIG_HOME/goose`` (else ``~/.config/goose``) elsewhere. Project
scopes are relative to the working directory. opencode's servers are under
``mcp.servers`` (its v2 layout, also where a new one goes) or directly under ``mcp``
(v1), whichever the file uses; a file with both has both read and edited in place.

Pure: the paths are computed, not looked at (except opencode's ``.jsonc`` spelling and
its project ``.opencode/`` folder, the first existing of ``opencode.json``,
``opencode.jsonc``, ``.opencode/opencode.json``, ``.opencode/opencode.jsonc``, which
the caller picks through ``exists``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from spillstore._clients.formats import Format, JsonFormat, TomlFormat
from spillstore._clients.wrap import Flavor
from spillstore._clients.yaml_format import YamlFormat

__all__ = ["CLIENTS", "Client", "Place", "backup_dir"]


@dataclass(frozen=True)
class Place:
    """Where the user is: home directory, operating system (``linux``, ``darwin``,
    ``windows``), environment and working directory."""

    home: Path
    system: str
    env: Mapping[str, str]
    cwd: Path

    def config_dir(self) -> Path:
        """The per-user config directory of desktop apps on this system."""
        if self.system == "darwin":
            return self.home / "Library" / "Application Support"
        if self.system == "windows":
            return Path(self.env.get("APPDATA") or self.home / "AppData" / "Roaming")
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")

    def xdg_config(self) -> Path:
        """``$XDG_CONFIG_HOME``, else ``~/.config`` (CLI tools use it on macOS too)."""
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")


def backup_dir(place: Place) -> Path:
    """Where ``install`` keeps the original entries (0700; each backup 0600)."""
    if place.system == "darwin":
        return place.home / "Library" / "Application Support" / "spillstore" / "clients"
    if place.system == "windows":
        local = place.env.get("LOCALAPPDATA")
        return Path(local or place.home / "AppData" / "Local") / "spillstore" / "clients"
    state = place.env.get("XDG_STATE_HOME") or place.home / ".local" / "state"
    return Path(state) / "spillstore" / "clients"


Locate = Callable[[Place, str, Callable[[Path], bool]], tuple[Path, Format]]


@dataclass(frozen=True)
class Client:
    """One MCP client: its name on the command line, how it writes entries, its scopes
    (the first is the default) and where each scope's servers are."""

    name: str
    title: str
    flavor: Flavor
    scopes: tuple[str, ...]
    locate: Locate


_SERVERS = JsonFormat(("mcpServers",))


def _claude_code(place: Place, scope: str, exists: Callable[[Path], bool]) -> tuple[Path, Format]:
    if scope == "project":
        return place.cwd / ".mcp.json", _SERVERS
    folder = place.env.get("CLAUDE_CONFIG_DIR")
    path = Path(folder) / ".claude.json" if folder else place.home / ".claude.json"
    if scope == "local":
        return path, JsonFormat(("projects", str(place.cwd), "mcpServers"))
    return path, _SERVERS


def _user_or_project(user: Callable[[Place], Path], project: str | None, fmt: Format) -> Locate:
    """A client with one file per scope: ``user(place)``, and ``project`` (relative to the
    working directory; None for a client with no project scope)."""

    def locate(place: Place, scope: str, exists: Callable[[Path], bool]) -> tuple[Path, Format]:
        if scope == "project" and project is not None:
            return place.cwd / project, fmt
        return user(place), fmt

    return locate


def _codex_home(place: Place) -> Path:
    home = place.env.get("CODEX_HOME")
    return Path(home) if home else place.home / ".codex"


def _zed_dir(place: Place) -> Path:
    if place.system == "windows":
        return place.config_dir() / "Zed"
    return place.xdg_config() / "zed"


def _goose_config(place: Place) -> Path:
    root = place.env.get("GOOSE_PATH_ROOT")
    if root:
        return Path(root) / "config" / "config.yaml"
    if place.system == "windows":
        return place.config_dir() / "Block" / "goose" / "config" / "config.yaml"
    return place.xdg_config() / "goose" / "config.yaml"


def _opencode(place: Place, scope: str, exists: Callable[[Path], bool]) -> tuple[Path, Format]:
    folders = [place.xdg_config() / "opencode"]
    if scope == "project":
        folders = [place.cwd, place.cwd / ".opencode"]
    names = ("opencode.json", "opencode.jsonc")
    found = [folder / name for folder in folders for name in names]
    path = next((path for path in found if exists(path)), found[0])
    return path, JsonFormat(("mcp", "servers"), ("mcp",), mixed=True)


_BOTH = ("user", "project")

CLIENTS: dict[str, Client] = {
    client.name: client
    for client in (
        Client("claude-code", "Claude Code", Flavor(), ("user", "local", "project"), _claude_code),
        Client(
            "claude-desktop",
            "Claude Desktop",
            Flavor(stdio_type=None),
            ("user",),
            _user_or_project(
                lambda p: p.config_dir() / "Claude" / "claude_desktop_config.json", None, _SERVERS
            ),
        ),
        Client(
            "cursor",
            "Cursor",
            Flavor(stdio_type=None),
            _BOTH,
            _user_or_project(
                lambda p: p.home / ".cursor" / "mcp.json", ".cursor/mcp.json", _SERVERS
            ),
        ),
        Client(
            "windsurf",
            "Windsurf",
            Flavor(url_keys=("serverUrl", "url"), stdio_type=None),
            ("user",),
            _user_or_project(
                lambda p: p.home / ".codeium" / "windsurf" / "mcp_config.json", None, _SERVERS
            ),
        ),
        Client(
            "vscode",
            "VS Code",
            Flavor(),
            _BOTH,
            _user_or_project(
                lambda p: p.config_dir() / "Code" / "User" / "mcp.json",
                ".vscode/mcp.json",
                JsonFormat(("servers",)),
            ),
        ),
        Client(
            "gemini",
            "Gemini CLI",
            Flavor(url_keys=("httpUrl",), sse_keys=("url",), stdio_type=None),
            _BOTH,
            _user_or_project(
                lambda p: p.home / ".gemini" / "settings.json", ".gemini/settings.json", _SERVERS
            ),
        ),
        Client(
            "codex",
            "Codex",
            Flavor(stdio_type=None, headers_key="http_headers"),
            _BOTH,
            _user_or_project(
                lambda p: _codex_home(p) / "config.toml",
                ".codex/config.toml",
                TomlFormat("mcp_servers"),
            ),
        ),
        Client(
            "zed",
            "Zed",
            Flavor(stdio_type=None, nested_command=True),
            _BOTH,
            _user_or_project(
                lambda p: _zed_dir(p) / "settings.json",
                ".zed/settings.json",
                JsonFormat(("context_servers",)),
            ),
        ),
        Client(
            "opencode",
            "opencode",
            Flavor(
                command_list=True, stdio_type="local", remote_type="remote", env_key="environment"
            ),
            _BOTH,
            _opencode,
        ),
        Client(
            "goose",
            "Goose",
            Flavor(
                url_keys=("uri",),
                remote_type="streamable_http",
                env_key="envs",
                command_key="cmd",
                new_fields=(("enabled", True), ("timeout", 300), ("description", "")),
                name_key="name",
            ),
            ("user",),
            _user_or_project(_goose_config, None, YamlFormat("extensions")),
        ),
    )
}
"""Every client, by its command-line name."""
