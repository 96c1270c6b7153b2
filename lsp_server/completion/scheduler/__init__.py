"""The schedulers: one per backend tier (worker.py: what runs next; jobqueue.py: what it holds) and its engine
thread (runner.py: runs the jobs and writes what they make into the store)."""
