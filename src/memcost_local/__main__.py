"""``python -m memcost_local``: see :mod:`memcost_local.server`."""

import sys

from memcost_local.server import main

sys.exit(main())
