import sys

from rota.cli import main

sys.exit(main())
