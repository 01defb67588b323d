"""Old name, kept one release; use ring.plan.lineage."""

import sys

from ring.plan import lineage as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
