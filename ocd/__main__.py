import sys

from ocd.cli import main

sys.exit(main())
