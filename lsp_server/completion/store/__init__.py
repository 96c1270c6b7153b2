"""The store: every answer that exists (store.py), the disk cache's part (ondisk.py), what a request gets
(answers.py). The one channel from the schedulers to the requests."""
