"""``python -m easerve`` runs the command-line front door."""

import sys

from easerve.cli import main

sys.exit(main())
