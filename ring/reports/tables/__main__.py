"""``python -m ring.reports.tables NAME ...``, what the workflow's table rules run: ``ring table``."""

import sys

from ring.reports.tables.registry import main

sys.argv[0] = "python -m ring.reports.tables"  # its usage line names the command as typed
sys.exit(main())
