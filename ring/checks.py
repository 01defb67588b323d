"""Old name, kept one release; use ring.plan.checks."""

import sys

from ring.plan import checks as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
