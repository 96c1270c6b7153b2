"""`python -m lsp_server` is `flint serve` (same options)."""

import sys

from lsp_server.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
