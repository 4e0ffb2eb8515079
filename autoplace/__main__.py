import sys

from autoplace.cli.entry import main

sys.exit(main())
