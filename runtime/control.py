"""The doors' entry to the acts on a run: the CLI, the console and the HTTP API import this.

Each name lives in the module of its seam, and is re-exported here so that a
door needs one import:

- `act_table`: the acts as the doors offer them (`ACTS`, `VERBS`, `Act`);
- `acts`: resolving a run by id or prefix and what an act answers
  (`act_base`: `ActResult`, `DONE`, `REFUSED`, `USAGE`), stop (and the stops
  set for later, `stop_later`), resume, approve, cancel, `perform` (an entry
  of the table carried out), and `no_worker_warning`;
- `submit`: a run created, its budget its flow's with the door's over it;
- `claims`: a host taking a run at a new epoch (`claim_queued`,
  `claim_for_resume`);
- `leases`: a host's lease and what a looker does past it (`mark_lost`,
  `live_worker_count`);
- `journal`: the audit and the run's events as the store keeps them.

Code inside `runtime/` imports from those modules directly.
"""

from swarmkit.store.records import UNLOADABLE as UNLOADABLE

from .act_table import ACTS as ACTS
from .act_table import VERBS as VERBS
from .act_table import Act as Act
from .act_table import no_worker_hint as no_worker_hint
from .acts import DONE as DONE
from .acts import NOW_LOSES as NOW_LOSES
from .acts import OVERDUE_FACTOR as OVERDUE_FACTOR
from .acts import OVERDUE_FLOOR_S as OVERDUE_FLOOR_S
from .acts import REFUSED as REFUSED
from .acts import USAGE as USAGE
from .acts import ActResult as ActResult
from .acts import approve as approve
from .acts import cancel as cancel
from .acts import no_worker_warning as no_worker_warning
from .acts import overdue_at as overdue_at
from .acts import perform as perform
from .acts import resolve_run as resolve_run
from .acts import resolve_view as resolve_view
from .acts import resume as resume
from .acts import stop as stop
from .claims import claim_for_resume as claim_for_resume
from .claims import claim_queued as claim_queued
from .errors import AmbiguousRun as AmbiguousRun
from .errors import RunNotFound as RunNotFound
from .journal import record_audit as record_audit
from .journal import record_event as record_event
from .journal import state_json as state_json
from .journal import storable as storable
from .leases import live_worker_count as live_worker_count
from .leases import mark_lost as mark_lost
from .submit import submit as submit
