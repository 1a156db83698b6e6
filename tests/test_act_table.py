"""The one table of acts (runtime/act_table.py): every door offers what it says, and each act does what
the table says of it (the audit action it records, the statuses it applies to, the worker warning)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update

from swarmkit.runtime import control
from swarmkit.runtime.act_table import ACTS, VERBS
from swarmkit.runtime.flow import parse_flow
from swarmkit.store import Store
from swarmkit.store.models import jobs
from swarmkit.store.queries import audit_for

ONE = 'name = "one"\n[[agents]]\nname = "only"\ncommand = "echo hi"\n'


def test_every_door_reads_the_one_table():
    from swarmkit.cli.acts_parser import HELP
    from swarmkit.cli.command import build_parser
    from swarmkit.console.acts import ACTS as CONSOLE_ACTS

    assert all(ACTS[verb].name == ACTS[verb].verb == verb for verb in VERBS)
    assert {act.rule for act in CONSOLE_ACTS} == set(ACTS.values())
    assert all(act.help == act.rule.help and act.confirms == act.rule.confirms_on for act in CONSOLE_ACTS)
    parser = build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb").choices
    assert set(VERBS) <= set(verbs) and list(HELP) == list(VERBS)


def test_the_api_routes_every_verb_of_the_table():
    from swarmkit.api.jobs import router

    posted = {r.path: r.name for r in router.routes if "POST" in getattr(r, "methods", ())}
    assert {f"/jobs/{{job_id}}/{verb}": verb for verb in VERBS}.items() <= posted.items()


async def test_each_act_records_its_audit_action_on_the_statuses_it_applies_to(sqlite_url: str, workspace: Path):
    flow = parse_flow(ONE)
    store = await Store.open(sqlite_url, workspace, create=True)
    try:
        async def made(status: str) -> str:
            job = await _submit(store, flow)
            if status != "queued":
                async with store.write() as conn:
                    await conn.execute(update(jobs).where(jobs.c.id == job).values(status=status, pending_gate="only" if status == "deferred" else None))
            return job

        for name, act in ACTS.items():
            for status in sorted(act.applies_to - {"running"}):  # a running run needs a host: test_control's
                run = await made(status)
                res = await control.perform(act, store, run)
                assert res.changed, (name, status, res.message)
                actions = [a.action for a in await store.run_read(lambda c, run=run: audit_for(c, run))]
                assert act.audit in actions, (name, status, actions)
                if act.wants_worker(res.changed):
                    assert "no live worker" in await control.no_worker_warning(store, res.job.short_id, 30.0)
    finally:
        await store.close()


async def _submit(store: Store, flow) -> str:
    from swarmkit.runtime import control

    return (await control.submit(store, flow, {})).id


def test_what_an_act_destroys_is_the_tables_and_the_api_says_it():
    from swarmkit.api.jobs import router

    described = {route.path.rsplit("/", 1)[1]: route.description for route in router.routes if route.path.startswith("/jobs/{job_id}/")}
    assert described["cancel"] == "With keep=false: destroys its workspaces"
    assert described["stop"] == "With now=true: destroys the work of the node in flight"
    assert not described["resume"] and not described["approve"]
    assert {a.name for a in ACTS.values() if a.destroys} == {"cancel", "stop_now"}
