"""``python -m memcost run|report``: see :mod:`memcost.cli.main`."""

import sys

from memcost.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
