"""The ``spillstore`` command line (the console script ``spillstore._cli:main``).

``main`` imports :mod:`spillstore._cli.app` only when it runs, so importing this package
costs nothing. ``python -m spillstore._cli`` runs the same ``main``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``spillstore`` command line and exit with its status."""
    from spillstore._cli.app import main as run  # noqa: PLC0415 - see the module docstring

    run(argv)
