"""``python -m memcost run|report``: see :mod:`memcost.cli`."""

import sys

from memcost.cli import main

if __name__ == "__main__":
    sys.exit(main())
