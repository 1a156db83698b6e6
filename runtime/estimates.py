"""What a run not yet ended will cost (issue 32): what it spent, how fast, and an estimate at completion.

The estimate is what it spent plus, for each node still to run (the one in flight included), the median
cost of a node over the same flow's newest completed runs (`store.reads.node_costs`); with none finished
there is no estimate. Every door labels it as one: `status ID`, `GET /jobs/{id}/estimate`, the console's
detail pane.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import TERMINAL_STATUSES

from .run_columns import burn_rate, burn_text


@dataclass(frozen=True)
class Estimate:
    cost: float  # spent so far
    burn_per_min: float | None  # what it spends a minute, by run_columns.burn_rate (None: not running, or too new to say)
    node_cost: float | None  # the median cost of a node of its flow (None: no completed run to go by)
    basis: int  # how many completed runs that median is of
    at_completion: float | None  # the estimate (None: no basis, or the run has ended)

    def words(self) -> str:
        """'$1.80 at completion (an estimate: $0.60 a node, the median of 12 completed runs); $1.20 so far; burning $0.30/m'."""
        burn = f"; burning {burn_text(self.burn_per_min)}" if self.burn_per_min is not None else ""
        if self.at_completion is None:
            return f"${self.cost:.2f} so far; no estimate (no completed run of its flow to go by){burn}"
        runs = "run" if self.basis == 1 else "runs"
        return f"${self.at_completion:.2f} at completion (an estimate: ${self.node_cost:.2f} a node, the median of {self.basis} completed {runs}); ${self.cost:.2f} so far{burn}"

    def as_json(self, job_id: str) -> dict:
        return {
            "job_id": job_id, "cost": self.cost, "burn_per_min": self.burn_per_min, "median_node_cost": self.node_cost,
            "basis_runs": self.basis, "estimate_at_completion": self.at_completion, "is_estimate": True,
        }


def estimate_of(job: JobRecord, node_costs: list[float], now: datetime) -> Estimate:
    """`job`'s estimate, given what a node of its flow cost in its completed runs (`store.reads.node_costs`)."""
    burn = burn_rate(job, now)  # the run table's rule for what a running run spends a minute
    per_node = statistics.median(node_costs) if node_costs else None
    ended = job.status in TERMINAL_STATUSES
    at = None if per_node is None or ended else job.cost + max(0, job.steps - job.step) * per_node
    return Estimate(job.cost, burn, per_node, len(node_costs), at)
