"""Old name, kept one release; use ring.data.fetch."""

import sys

from ring.data import fetch as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
