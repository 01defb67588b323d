"""Old name, kept one release; use ring.engine.knn."""

import sys

from ring.engine import knn as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
