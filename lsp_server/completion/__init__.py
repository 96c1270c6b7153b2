"""The completion service (docs/architecture.md), one folder per concern, imported in this order only
(tests/test_layout.py): ``jobs`` and ``events`` (the vocabulary, the one way up), ``policy/`` (the planner),
``store/`` (every answer), ``scheduler/`` (a worker per backend tier), ``requests/`` (what the session calls).
"""

from lsp_server.completion.events import Worked
from lsp_server.completion.jobs import State
from lsp_server.completion.policy import planner
from lsp_server.completion.requests.service import CompletionService, Load
from lsp_server.completion.scheduler.worker import Worker
from lsp_server.completion.store.tickets import Answer

__all__ = ["Answer", "CompletionService", "Load", "State", "Worked", "Worker", "planner"]
