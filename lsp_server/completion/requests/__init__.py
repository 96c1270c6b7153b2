"""Requests: the service the session calls (service.py) and what carries out and follows a request."""
