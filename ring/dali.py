"""Old name, kept one release; use ring.data.dali."""

import sys

from ring.data import dali as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
