"""Old name, kept one release; use ring.cluster.accounting."""

import sys

from ring.cluster import accounting as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
