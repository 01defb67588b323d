"""Old name, kept one release; use ring.engine.health."""

import sys

from ring.engine import health as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
