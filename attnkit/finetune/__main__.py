"""``python -m attnkit.finetune ...`` is ``attnkit finetune ...``."""

import sys

from ..cli import main

sys.exit(main(["finetune", *sys.argv[1:]]))
