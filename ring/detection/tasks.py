"""Old name, kept one release; use ring.plan.detection_tasks."""

import sys

from ring.plan import detection_tasks as _new

sys.modules[__name__] = _new  # the same module object, private names and monkeypatching included
