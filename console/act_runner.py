"""Carrying out an act from the console: on the marked runs or the one under the cursor, asking first
where the acts table says so, through the runtime's control functions, and saying what came of it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from swarmkit.runtime import control
from swarmkit.runtime.batch_acts import act_on_runs
from swarmkit.runtime.errors import SwarmkitError
from swarmkit.runtime.workspaces import dir_size
from swarmkit.store.reads import get_job, workspaces_for
from swarmkit.store.store_errors import is_store_fault
from swarmkit.widgets.confirm_dialog import ConfirmDialog

from .act_dialogs import Outcome, Target, confirmation, outcome_lines, outcome_summary
from .acts import ACT_BY_VERB, Act

if TYPE_CHECKING:
    from textual.app import App

    from swarmkit.widgets.run_table import RunTable

    from .config import ConsoleConfig
    from .store_link import StoreLink

log = logging.getLogger("swarmkit.console")


class ActHost(Protocol):
    """What an act needs of the screen it runs on (the main screen, an ActingScreen): named here so
    that this module, loaded at the first act, imports no screen."""

    link: StoreLink
    config: ConsoleConfig
    actor: str
    read_only: bool
    clock: Callable[[], datetime]

    @property
    def app(self) -> App[Any]: ...
    @property
    def closing(self) -> bool: ...
    def say(self, message: str, severity: str = "information", *, toast: bool = True) -> None: ...
    def problem_words(self, exc: BaseException) -> str: ...
    def poll_now(self) -> None: ...
    def query_one_table(self) -> RunTable: ...
    def run_worker(self, work: Coroutine[Any, Any, Any], *, group: str) -> Any: ...


class ActRunner:
    """One act at a time per key press, each in a worker of the screen's `acts` group."""

    def __init__(self, screen: ActHost) -> None:
        self.screen = screen

    def start(self, act: Act, run_ids: list[str], *, bulk: bool) -> None:
        self.screen.run_worker(self._run(act, run_ids, bulk), group="acts")

    async def _read(self, run_ids: list[str], with_workspaces: bool) -> tuple[list[Target], list[str]]:
        link = self.screen.link
        store = await link.get()
        async with store.read() as conn:
            jobs = {rid: await conn.run_sync(get_job, rid) for rid in run_ids}
            wss = await conn.run_sync(workspaces_for, run_ids) if with_workspaces else {}
        missing = [rid for rid, job in jobs.items() if job is None]
        found = [(job, [w for w in wss.get(rid, []) if w.state != "destroyed"]) for rid, job in jobs.items() if job is not None]

        def sized() -> list[Target]:
            return [Target(job, tuple((w.path, w.state, dir_size(w.path)) for w in live)) for job, live in found]

        return await asyncio.to_thread(sized), missing

    async def _run(self, act: Act, run_ids: list[str], bulk: bool) -> None:
        screen = self.screen
        if screen.read_only:
            return
        what = act.verb.replace("_", " ")
        try:
            targets, missing = await screen.link.shielded(self._read(run_ids, act.rule.names_workspaces))
        except Exception as exc:
            if screen.closing:
                return
            screen.say(f"could not {what} {', '.join(r[:8] for r in run_ids)}: {screen.problem_words(exc)}", "error")
            return
        if missing and not targets:
            screen.say(f"run {missing[0][:8]} no longer exists in {screen.link.display}", "error")
            return
        if any(t.job.status in act.confirms for t in targets):
            asked = confirmation(act, targets, screen.clock())
            choice = await screen.app.push_screen_wait(ConfirmDialog(asked.title, asked.body, list(asked.choices), back_label="Back"))
            if screen.closing:
                return
            if choice is None:
                screen.say(f"{', '.join(t.job.short_id for t in targets[:4])}{' …' if len(targets) > 4 else ''}: nothing done", "information")
                return
            if choice == "stop":
                act = ACT_BY_VERB["stop"]
        if bulk:  # the marked runs: one batch, as `swarmkit stop --flow ...` acts on the runs it names
            outcomes = await screen.link.shielded(self._many(act, [t.job.id for t in targets]))
        else:
            outcomes = [await screen.link.shielded(self._one(act, t.job.id)) for t in targets]
        outcomes += [Outcome(rid[:8], None, f"no longer exists in {screen.link.display}") for rid in missing]
        if screen.closing:
            return
        hint = await screen.link.shielded(self._worker_hint(act, outcomes))
        if screen.closing:
            return
        if not bulk:
            self._say_one(outcomes[0], what, hint)
        else:
            self._say_many(act, outcomes, hint)
        screen.poll_now()

    def _say_one(self, outcome: Outcome, what: str, hint: str) -> None:
        res = outcome.result
        if res is None:
            self.screen.say(outcome.error, "error")
            return
        severity = "error" if res.code != control.DONE else "information" if res.changed else "warning"
        message = res.message
        if hint:
            message, severity = message + "\n" + hint, "warning"
        self.screen.say(message, severity)

    def _say_many(self, act: Act, outcomes: list[Outcome], hint: str) -> None:
        summary, severity = outcome_summary(act, outcomes, self.screen.clock())
        if hint:
            summary, severity = summary + "\n" + hint, "warning" if severity == "information" else severity
        self.screen.query_one_table().clear_marks()
        self.screen.say(summary, severity)
        if severity != "information":
            # Not everything went as asked: every run's outcome, in the runtime's words.
            self.screen.app.push_screen(ConfirmDialog(summary.split("\n")[0], outcome_lines(outcomes), [], back_label="OK"))

    async def _worker_hint(self, act: Act, outcomes: list[Outcome]) -> str:
        queued = [o for o in outcomes if o.result is not None and act.rule.wants_worker(o.result.changed)]
        if not queued:
            return ""
        try:
            return await control.no_worker_warning(await self.screen.link.get(), queued[0].short_id, self.screen.config.lease_s)
        except Exception:  # the hint is a courtesy: the act itself is done
            return ""

    async def _many(self, act: Act, run_ids: list[str]) -> list[Outcome]:
        """The act on every marked run by runtime/batch_acts.py, one batch id on their audit entries."""
        try:
            batch = await act_on_runs(await self.screen.link.get(), act.rule, run_ids, actor=self.screen.actor)
            return list(batch.outcomes)
        except Exception as exc:
            if not is_store_fault(exc):
                log.exception("%s failed", act.verb)
            words = f"could not {act.verb.replace('_', ' ')}: {self.screen.problem_words(exc)}"
            return [Outcome(rid[:8], None, words) for rid in run_ids]

    async def _one(self, act: Act, run_id: str) -> Outcome:
        """One act through the runtime's control functions."""
        try:
            store = await self.screen.link.get()
            res = await control.perform(act.rule, store, run_id, actor=self.screen.actor)
            return Outcome(res.job.short_id if res.job else run_id[:8], res)
        except SwarmkitError as exc:
            return Outcome(run_id[:8], None, str(exc))
        except Exception as exc:
            if not is_store_fault(exc):
                log.exception("%s failed", act.verb)
            return Outcome(run_id[:8], None, f"could not {act.verb.replace('_', ' ')} {run_id[:8]}: {self.screen.problem_words(exc)}")
