"""The store: every answer that exists (store.py, with the disk cache's front: engine/cache/entries.py) and
what a request holds and gets (tickets.py). The one channel from the schedulers to the requests."""
