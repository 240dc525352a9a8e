"""``python -m spillstore.mcp``: the spill server and the capping proxy."""

import sys

from spillstore.mcp import main

sys.exit(main())
