"""Requests: the service the session calls (service.py) and what carries out a request and what follows it
(explicit.py, followups.py, refresh.py, race.py, pause.py), and the shaping of answers (items.py, picks.py)."""
