"""MCP client configs: where each client keeps its servers, and safe edits of them.

The layer behind ``spillstore install | uninstall | status | add`` (only ``_cli``
imports it). Bottom up: ``errors`` (:class:`ClientConfigError`), ``jsonc`` (JSON with
comments, parsed with spans and edited in place), ``wrap`` (one entry behind the proxy
and back, on plain values), ``formats`` (JSON/JSONC and TOML documents: list, patch,
restore, add entries), ``registry`` (the clients, their scopes and paths), ``ops``
(install/uninstall/status/add on one file's text) and ``files`` (the only I/O: reads,
atomic checked writes, backups).
"""
