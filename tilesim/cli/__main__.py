"""``python -m tilesim.cli``: the ``tilesim`` command without the console script."""

from tilesim.cli.base import main

main()
