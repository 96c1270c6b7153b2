"""The store: every answer that exists (store.py, with the disk cache's front: engine/cache/front.py) and
what a request holds and gets (tickets.py). The one channel from the schedulers to the requests."""
