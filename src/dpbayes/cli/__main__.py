import sys

from dpbayes.cli import main

sys.exit(main())
