"""`python -m lsp_server` is `flint serve` (same options; -v/--verbose allowed anywhere)."""

import sys

from lsp_server.cli import main

if __name__ == "__main__":
    argv = sys.argv[1:]
    verbose = [a for a in argv if a in ("-v", "--verbose")]
    sys.exit(main([*verbose, "serve", *(a for a in argv if a not in verbose)]))
