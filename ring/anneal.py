"""Old name, kept one release; use ring.engine.anneal."""

import sys

from ring.engine import anneal as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
