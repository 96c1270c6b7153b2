"""The schedulers: one per backend tier (worker.py: what runs next; jobqueue.py: what it holds), its engine
thread (runner.py) and how it writes into the store (hooks.py)."""
