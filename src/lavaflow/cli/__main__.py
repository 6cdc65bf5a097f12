"""`python -m lavaflow.cli`."""

from .main import main

main()
