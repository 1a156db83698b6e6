"""The API's bodies: what a request may send (strictly: unknown fields and wrong types are 422) and what it gets."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    # No coercion ("true" is not true, 1 is not "1") and no unknown fields: a typo
    # in a client must be an error it sees, not a silently different act.
    model_config = ConfigDict(extra="forbid", strict=True)


class BudgetBody(_Strict):
    """A run's limits, as a flow file's [budget] writes them (runtime/budgets.py); a resume may write "+5" to raise one."""

    max_cost: float | str | None = Field(None, description="dollars: 5, or \"+5\" on a resume to raise the limit")
    max_tokens: int | str | None = Field(None, description="tokens: 100000 or \"100k\"")
    max_wall: float | str | None = Field(None, description="the time its agents run: seconds, or \"30m\"")
    max_nodes: int | str | None = Field(None, description="nodes finished")
    hard: bool | None = Field(None, description="a reached limit interrupts the node in flight (as stop --now)")


class SubmitBody(_Strict):
    flow: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="a flow file in the server's --flows folder, by name (with or without .toml)")
    inputs: dict[str, str] = Field(default_factory=dict, description="the run's inputs, as `swarmkit run --input key=value`")
    budget: BudgetBody | None = Field(None, description="limits over the flow's own [budget], as `swarmkit run --budget`")


class ResumeBody(_Strict):
    budget: BudgetBody | None = Field(None, description="limits changed as it resumes, as `swarmkit resume --budget`")


class StopBody(_Strict):
    now: bool = Field(False, description="interrupt the node in flight and park the run before it (stop --now); that node runs again from its start on resume")
    when: str | None = Field(None, max_length=200, description="a stop set for later, once this holds: 'cost>2.5', 'tokens>100k', 'wall>30m', 'nodes>=3' (stop --when)")
    after: str | None = Field(None, max_length=200, description="a stop set for later, at the boundary after this agent (stop --after)")
    before: str | None = Field(None, max_length=200, description="a stop set for later, at the boundary before this agent (stop --before)")
    clear: bool = Field(False, description="take off every stop set for later (stop --clear)")


class CancelBody(_Strict):
    keep: bool = Field(False, description="keep the run's workspaces")


class BatchBody(_Strict):
    """The runs to act on, as `swarmkit status` filters them, and the act's own flags."""

    status: list[str] = Field(default_factory=list, description="shown or stored statuses (running, stalled, stopped, ...)")
    flow: list[str] = Field(default_factory=list, description="flows' names")
    node: list[str] = Field(default_factory=list, description="the agents runs are at")
    since: str | None = Field(None, max_length=40, description="only runs changed within this long: 30s, 5m, 2h, 1d")
    older_than: str | None = Field(None, max_length=40, description="only runs not changed within this long")
    all: bool = Field(False, description="every run the act applies to (with no other filter)")
    dry_run: bool = Field(False, description="list the runs, act on none")
    now: bool | None = Field(None, description="stop only: interrupt the node in flight (stop --now)")
    keep: bool | None = Field(None, description="cancel only: keep the runs' workspaces")
    budget: BudgetBody | None = Field(None, description="resume only: limits changed as they resume")


class Problem(BaseModel):
    """Every 4xx and 5xx: `detail` says what happened in the CLI's words."""

    detail: str
    status: str | None = None
    candidates: list[str] | None = None
    errors: list[dict[str, Any]] | None = None


class JobPage(BaseModel):
    """A page of runs: the run list's one shape (runtime/schemas/run_list.schema.json), and the cursor to the next page."""

    # `schema` would shadow BaseModel.schema(): the field is named apart, the JSON key is `schema`.
    model_config = ConfigDict(populate_by_name=True)
    schema_version: int = Field(alias="schema")
    runs: list[dict[str, Any]]
    next_cursor: str | None
    has_more: bool


class ActAnswer(BaseModel):
    job_id: str
    action: str
    changed: bool
    already_requested: bool
    detail: str
    status: str
    display_status: str
    stop_requested_at: str | None
    stop_requested_by: str | None
    hint: str | None = None
    job: dict[str, Any]


class EstimateAnswer(BaseModel):
    """runtime/estimates.py's figures: an estimate, labelled as one."""

    job_id: str
    cost: float
    burn_per_min: float | None
    median_node_cost: float | None
    basis_runs: int
    estimate_at_completion: float | None
    is_estimate: bool


class Event(BaseModel):
    id: int
    job_id: str
    at: str
    kind: str
    node: str | None
    step: int | None
    text: str


class EventPage(BaseModel):
    events: list[Event]
    next_cursor: int | None
    has_more: bool


class AuditEntry(BaseModel):
    id: int
    at: str
    actor: str
    action: str
    job_id: str | None
    detail: dict[str, Any]


class AuditPage(BaseModel):
    events: list[AuditEntry]
    next_cursor: int | None
    has_more: bool


class Health(BaseModel):
    ok: bool
    store: str
    schema_revision: str | None
    schema_head: str
    hosting: bool
    auth: bool


# The error answers every route of the routers documents (each a Problem), besides its own.
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (400, 401, 403, 404, 409, 413, 415, 422, 503)}
