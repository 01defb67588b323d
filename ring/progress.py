"""Old name, kept one release; use ring.cluster.progress."""

import sys

from ring.cluster import progress as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
