"""``python -m attnkit.apps.finetune ...`` is ``attnkit finetune ...``."""

import sys

from .command import main

sys.exit(main())
