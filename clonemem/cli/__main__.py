"""`python -m clonemem.cli`: the console script."""

from clonemem.cli.exit import main

main()
