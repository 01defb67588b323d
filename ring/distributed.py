"""Old name, kept one release; use ring.engine.distributed."""

import sys

from ring.engine import distributed as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
