"""The store: every answer that exists (store.py) and what a request holds and gets (tickets.py)."""
