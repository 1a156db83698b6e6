"""Swarmkit's runtime: flows, the executor, run control, workers, workspaces and audit.

Never imports Textual.
"""

from .errors import (
    GateDeferredError,
    HITLDeferredError,
    RunCancelledError,
    RunStoppedError,
)

__all__ = ["GateDeferredError", "HITLDeferredError", "RunCancelledError", "RunStoppedError"]
