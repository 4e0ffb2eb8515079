import sys

from autoplace.cli.main import main

sys.exit(main())
