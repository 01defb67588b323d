"""Old name, kept one release; use ring.engine.runtime."""

import sys

from ring.engine import runtime as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
