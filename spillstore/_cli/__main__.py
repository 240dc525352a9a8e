"""``python -m spillstore._cli``: the same as the ``spillstore`` command."""

from spillstore._cli.app import main

main()
