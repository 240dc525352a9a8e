"""``python -m spillstore._cli``: the same as the ``spillstore`` command."""

from spillstore._cli import main

main()
