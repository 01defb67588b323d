"""Old name, kept one release; use ring.data.datasets."""

import sys

from ring.data import datasets as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
