import sys

from ring.detection.runner import main

sys.exit(main())
