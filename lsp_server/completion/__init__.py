"""The completion service: one keystroke's path from a state to an answer (docs/architecture.md). Its
concerns, one folder each, imported in this order only (tests/test_layout.py):

- ``jobs`` and ``events``: the vocabulary (a State, a Job, how it ends) and the one way up;
- ``policy/``: what to generate for a cursor and when, as plain data (the planner);
- ``store/``: every answer that exists, and the one channel from the schedulers to the requests;
- ``scheduler/``: one worker per backend tier, its engine thread, how it writes into the store;
- ``requests/``: the service the session calls, a request's waiting, what follows an answer, the items.

Below is what the session uses. Never imports pygls or lsprotocol.
"""

from lsp_server.completion.events import Worked
from lsp_server.completion.jobs import State
from lsp_server.completion.policy import planner
from lsp_server.completion.requests.service import CompletionService, Load
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.tickets import Answer

__all__ = ["Answer", "CompletionService", "Load", "State", "Worked", "Worker", "planner"]
