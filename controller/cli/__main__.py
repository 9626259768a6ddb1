"""`python -m controller.cli`: the zonda command line."""

from controller.cli.main import main

main()
