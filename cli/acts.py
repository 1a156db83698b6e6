"""`swarmkit stop | approve | resume | cancel RUN_ID`: the four acts on one run, as runtime/act_table.py has them
(what each calls, whether it warns without a worker); their help and their flags are acts_parser.py's."""

from __future__ import annotations

from swarmkit.runtime.act_table import ACTS as TABLE
from swarmkit.runtime.acts import no_worker_warning, perform
from swarmkit.runtime.errors import UsageError
from swarmkit.runtime.exit_code import ExitCode
from swarmkit.runtime.settings import Settings
from swarmkit.runtime.text import plain_lines

from .common import run_filter
from .store_access import err, with_store

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from swarmkit.store import Store


async def cmd_act(args) -> int:
    act = TABLE[args.verb]
    # The door's flags: --now and the stops set for later (stop), --keep (cancel), --budget (resume).
    options = {k: getattr(args, k) for k in ("now", "keep", "budget", "when", "after", "before", "clear") if getattr(args, k, None) not in (None, [])}
    runs = run_filter(args)
    if runs.narrows or runs.all:
        from .batch import cmd_batch  # late: acts by filter (listing, asking, a line a run) are that module's

        return await cmd_batch(args, act, runs, options)
    if args.run_id is None:
        raise UsageError(f"{args.verb} needs a run id, or filters that name the runs (--flow, --status, --node, --since, --older-than) or --all")
    if args.dry_run or args.yes:
        raise UsageError("--dry-run and --yes go with filters that name the runs, not with one run id")

    async def go(store: Store) -> int:
        res = await perform(act, store, args.run_id, **options)
        # What was done goes to stdout; a refusal and a warning to stderr, where scripts look for them.
        if res.code == ExitCode.OK:
            print(plain_lines(res.message))
        else:
            err(res.message)
        if act.wants_worker(res.changed):
            warning = await no_worker_warning(store, res.job.short_id if res.job else args.run_id, Settings.from_env().lease_s)
            if warning:
                err("warning: " + warning)
        return res.code

    return await with_store(args, go)
