"""``python -m spillstore.mcp``: the spill server and the capping proxy (``spillstore mcp``)."""

import sys

from spillstore._cli.early import launch_early

launch_early(sys.argv[1:], ("proxy",))  # before the command line's imports (see there)

from spillstore._cli.mcp import main  # noqa: E402

main()
