"""Flint's language server (pygls). Imports run one way: lsp_server -> engine."""
