"""``python -m cck``: the same as the ``cck`` command."""

import sys

from cck._cli import main

if __name__ == "__main__":
    sys.exit(main())
