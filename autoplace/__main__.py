import sys

from autoplace.cli import main

sys.exit(main())
