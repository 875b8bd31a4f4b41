"""``python -m bench``: the runner."""

from bench.runner import main

raise SystemExit(main())
