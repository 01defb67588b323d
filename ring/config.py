"""Old name, kept one release; use ring.core.config."""

import sys

from ring.core import config as _new
from ring.plan.reference import describe_main

if __name__ == "__main__":
    sys.exit(describe_main(sys.argv[1:]))
else:
    sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
