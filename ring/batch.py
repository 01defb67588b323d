"""Old name, kept one release; use ring.cluster.batch."""

import sys

from ring.cluster import batch as _new

if __name__ == "__main__":
    sys.exit(_new.main())
else:
    sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
