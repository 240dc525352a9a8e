"""``python -m spillstore.mcp``: the spill server and the capping proxy (``spillstore mcp``)."""

from spillstore._cli.mcp import main

main()
