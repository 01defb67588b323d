"""Old name, kept one release; use ring.reports.tables."""

import sys

from ring.reports import tables as _new

if __name__ == "__main__":
    sys.exit(_new.main())
else:
    sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
