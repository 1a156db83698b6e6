"""`swarmkit stop | cancel | resume | approve` by filter: the runs the filters name, listed, asked for (or
`--yes`; `--dry-run` only lists), then acted on one by one by the one-run rules (runtime/batch_acts.py).

A line a run (what was done on stdout, a refusal on stderr), then the batch's id and its summary. Exit 0
when every run was acted on or needed nothing, 1 when any was refused.
"""

from __future__ import annotations

import asyncio
import sys

from swarmkit.runtime.act_table import Act
from swarmkit.runtime.batch_acts import act_on_runs, matching, summary
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.run_filter import RunFilter
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.text import plain
from swarmkit.store.clock import store_now

from .store_access import err, with_store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store


async def cmd_batch(args, act: Act, runs: RunFilter, options: dict[str, Any]) -> int:
    if args.run_id is not None:
        if args.workspace is None and (args.run_id.startswith((".", "~", "/")) or "/" in args.run_id):
            args.workspace, args.run_id = args.run_id, None  # `stop --flow x ~/site`: the folder, not a run
        else:
            raise UsageError(f"give a run id or filters that name the runs, not both ({args.run_id!r} and {runs.words()})")
    verb = act.verb

    async def go(store: Store) -> int:
        targets = await matching(store, act, runs)
        if not targets:
            print(f"no runs it can {verb} match {runs.words()}; nothing to {verb}.")
            return ExitCode.OK
        now = store_now()
        listed = "\n".join(f"{j.short_id}  {j.display_status(now):<12} {plain(j.flow, 40)}  {plain(j.current_node or '-', 30)}" for j in targets)
        many = f"{len(targets)} run{'s' if len(targets) != 1 else ''}"
        if args.dry_run:
            print(listed)
            print(f"would {verb} {many} ({runs.words()}); nothing done (--dry-run).")
            return ExitCode.OK
        if not args.yes:
            if not sys.stdin.isatty():
                err(f"{many} match {runs.words()}: add --yes to {verb} them without asking, or --dry-run to list them")
                return ExitCode.USAGE
            print(listed)
            answer = await asyncio.to_thread(input, f"{verb.capitalize()} these {many}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing done.")
                return ExitCode.OK
        batch = await act_on_runs(store, act, [j.id for j in targets], **options)
        for o in batch.outcomes:
            line = plain(o.words.split("\n", 1)[0])
            line = line if o.short_id in line else f"{o.short_id}: {line}"
            if o.refused:
                err(line)
            else:
                print(line, flush=True)
        print(f"batch {batch.id}: {summary(act, batch.outcomes)}.")
        queued = next((o for o in batch.outcomes if o.result is not None and act.wants_worker(o.result.changed)), None)
        if queued is not None:
            from swarmkit.runtime.acts import no_worker_warning  # late: only a batch that queued runs looks for a worker

            warning = await no_worker_warning(store, queued.short_id, Settings.from_env().lease_s)
            if warning:
                err("warning: " + warning)
        return batch.code

    return await with_store(args, go)
