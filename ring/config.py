"""The reference command, ``python -m ring.config describe [STAGE] [KEY]`` (ring.plan.reference's describe_main);
imported, the old name of ring.core.config, kept one release."""

import sys

from ring.core import config as _new
from ring.plan.reference import describe_main

if __name__ == "__main__":
    sys.exit(describe_main(sys.argv[1:]))
else:
    sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
