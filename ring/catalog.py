"""The dataset command, ``python -m ring.catalog check|fetch ...`` (ring.data.verify's main: it reads data with
torch); imported, the old name of ring.plan.catalog, kept one release."""

import sys

from ring.plan import catalog as _new
from ring.data import verify  # python -m ring.catalog check|fetch: ring.data.verify

if __name__ == "__main__":
    sys.exit(verify.main())
else:
    sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
