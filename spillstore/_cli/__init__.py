"""The ``spillstore`` command line."""

from spillstore._cli.app import main

__all__ = ["main"]
