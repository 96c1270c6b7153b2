"""The schedulers: one per backend tier (worker.py), what it holds (jobqueue.py), its engine thread (runner.py)."""
