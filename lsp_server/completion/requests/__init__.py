"""Requests: the service the session calls (service.py) and what carries out a request and what follows it
(explicit.py, followups.py, capable.py); the items the session builds from an answer are
lsp_server/items.py's."""
