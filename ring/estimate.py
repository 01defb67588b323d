"""Old name, kept one release; use ring.plan.estimate."""

import sys

from ring.plan import estimate as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
