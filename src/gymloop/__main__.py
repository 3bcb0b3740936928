"""``python -m gymloop`` runs the ``gymloop`` command."""

import sys

from .cli import main

sys.exit(main())
