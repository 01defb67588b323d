"""Old name, kept one release; use ring.cluster.jobs."""

import sys

from ring.cluster import jobs as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
