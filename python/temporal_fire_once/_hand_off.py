"""The hand-off of a local activity's wait when its worker shuts down (``src/common/hand-off.ts``).

A local activity runs on the worker of its workflow task, and the SDK never cancels one at
shutdown: a guarded one waiting in its slot for another worker's job would keep its worker from
stopping until the job ended. So the workflow interceptor marks every local activity it schedules
with ``HAND_OFF_HEADER``; a marked one waiting in its slot when its worker begins to shut down ends
with the non-retryable ``WORKER_SHUTDOWN_TYPE``, and the interceptor schedules it again behind a
timer of ``HAND_OFF_DELAY_S``, which lets the workflow task complete and the worker stop; the
workflow's next worker runs it. Pure constants: safe in the workflow sandbox and on the worker."""

from __future__ import annotations

HAND_OFF_HEADER = "temporal-fire-once-hand-off"
"""The header that asks for the hand-off; its presence is what counts."""

WORKER_SHUTDOWN_TYPE = "FireOnceWorkerShutdown"
"""The failure type that ends a marked local activity's wait as its worker shuts down."""

HAND_OFF_ATTEMPT = "handOffAttempt"
"""The field of that failure's details that names the attempt handed off, as a decimal string:
the workflow schedules the activity again with the attempts left, and takes a failure of the type
without it for the activity's own, which it does not hand off."""

HAND_OFF_ACTIVITY_ID = "handOffActivityId"
"""The field of that failure's details that names the ID of the local activity handed off: a
cancelled or timed-out local activity that the workflow fails in its place names it, as the SDK's
failure would (absent from failures recorded before 0.10.0)."""

HAND_OFF_CANCEL_PATCH = "temporal-fire-once-hand-off-cancel"
"""The patch (``workflow.patched()``, recorded in the history as a marker) under which a local
activity cancelled while handed off, or whose handed-off failure came after its workflow cancelled
it, ends cancelled (``HAND_OFF_CANCEL_PATCH`` in TypeScript): a history recorded before 0.10.0,
without it, replays as it ran."""

HAND_OFF_DELAY_S = 0.1
"""The timer between the ended local activity and the same one scheduled again (``HAND_OFF_DELAY_MS``)."""
