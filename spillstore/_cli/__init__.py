"""The ``spillstore`` command line (the console script ``spillstore._cli:main``).

``main`` imports :mod:`spillstore._cli.app` only when it runs, so importing this package
costs nothing. ``python -m spillstore._cli`` runs the same ``main``. Before it parses
anything, ``main`` starts the upstream server of ``mcp proxy ... -- CMD``
(:mod:`spillstore._cli.early`): the command line's own imports then overlap its boot.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``spillstore`` command line and exit with its status."""
    import sys  # noqa: PLC0415 - see the module docstring

    from spillstore._cli.early import launch_early  # noqa: PLC0415

    launch_early(sys.argv[1:] if argv is None else argv, ("mcp", "proxy"))
    from spillstore._cli.app import main as run  # noqa: PLC0415

    run(argv)
