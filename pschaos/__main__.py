"""`python -m pschaos`: the same command line as `pschaos`."""
from pschaos.harness.commands.cli import main

raise SystemExit(main())
