"""Old name, kept one release; use ring.core.failures."""

import sys

from ring.core import failures as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
