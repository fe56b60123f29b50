/*
 * fire-once.pml: the fire-once protocol v3 (PROTOCOL.md) for ONE (scope, step), as the Lua
 * scripts in src/core/scripts/ implement it, checked with spin. docs/model.md explains it;
 * `npm run model` (model/run.ts) checks every configuration.
 *
 * Each Lua script is one `atomic` step (Redis runs a script alone). The network calls between
 * them are not: any other process may move between an invocation's two calls.
 *
 * Switches (spin -D...):
 *   N, MAX_CRASH, MAX_EXPIRE, MAX_INVALIDATE, PARKERS, KEEPERS   sizes (below)
 *   EXTERNAL        the external-artifact mode: the job writes the artifact itself, after the
 *                   activity resolved; acquire runs in mode 'x'; success holds the lock (extend)
 *   Weaker variants, each of which must fail a property (the first four are the seed's strategies):
 *   NO_GUARD        every invocation dispatches
 *   ARTIFACT_ONLY   fast-forward to the artifact, no lock
 *   LOCK_ONLY       lock, no artifact check; the lock is left to its TTL after success
 *   RELEASE_ON_ANY  the lock is released when the job resolves, success included; the artifact
 *                   is written afterwards: the seed's "(b) resolved, not written" window
 *   PLAIN_DEL       release is a plain DEL instead of compare-and-delete (fails property 3)
 *   COARSE_CLOCK    the fencing token is TIME in whole seconds, not microseconds (fails property 4)
 *   LATE_OVERWRITE  commit writes the artifact whoever holds the lock, as commit.lua did up to
 *                   0.2.0: a late holder replaces a newer holder's stored result (fails property 6)
 *   OLD_REAP        reap leaves the waiter list's TTL alone, as reap.lua did up to 0.2.1: the list
 *                   of waiters parked on a holder that died may expire under the lock of the
 *                   holder that took over, whose commit then hands nobody over (fails property 7)
 *   CODEC_COMPLETES a result the payload codec refuses is kept (not stored) and the waiters are
 *                   taken but completed through that codec, which refuses again, as 0.2.2 did:
 *                   nobody hands them over (fails property 7)
 *   STRICT          a stronger property 1 that the protocol does NOT promise: no dispatch while
 *                   an earlier job succeeded and its result is not stored yet, even if that
 *                   holder's lease lapsed. It fails: a lease cannot tell a paused holder from a
 *                   dead one (docs/model.md, "What it does not promise").
 */

#ifndef N
#define N 3              /* invocations (activity executions) of the one (scope, step) */
#endif
#ifndef MAX_CRASH
#define MAX_CRASH 2      /* holders that crash (stop calling Redis for good) */
#endif
#ifndef MAX_EXPIRE
#define MAX_EXPIRE 2     /* lapses of a live holder's lease (paused past it) + artifact TTLs run out */
#endif
#ifndef MAX_INVALIDATE
#define MAX_INVALIDATE 1 /* invalidate.lua calls by an operator */
#endif
#ifndef KEEPERS
#define KEEPERS N        /* invocations whose successful result may go unstored (extend ... take) */
#endif
#ifndef PARKERS
#define PARKERS N        /* invocations that may park on a held lock (the others wait in the slot) */
#endif

/* ---- The alphabet: every reply of every modelled script, named as the Lua headers name them.
 * test/model/protocol-alphabet.test.ts checks this block against src/core/scripts/*.lua and
 * ACQUIRE_REPLY in src/core/scripts.ts, so the model cannot drift from the code silently.
 * Codes >= 100 stand for the replies that carry no code (a bulk string, a bare integer). */
#define ACQUIRE_FAST_FORWARD 100 /* bulk string: the artifact record (mode 'r'/'t') */
#define ACQUIRE_ACQUIRED     101 /* integer: the lock is ours; the fencing token */
#define ACQUIRE_EXISTS         1 /* {1, pttl}: the external artifact exists (mode 'x') */
#define ACQUIRE_HELD           3 /* {3, pttl, lock}: another token holds the lock */
#define ACQUIRE_CORRUPT        5 /* {5, error}: never here: the model's artifact is always a string */
#define COMMIT_NOT_OURS        0 /* artifact written; no lock stood (it had expired) */
#define COMMIT_OURS            1 /* artifact written; our lock deleted in the same step */
#define COMMIT_REFUSED         2 /* nothing written: another holder's lock, or a stored result, stands */
#define RELEASE_REFUSED        0 /* the lock is missing or another holder's: nothing changed */
#define RELEASE_DELETED        1 /* our lock is deleted */
#define EXTEND_LOST            0 /* the lock is missing or another holder's: nothing changed */
#define EXTEND_HELD            1 /* our lock's TTL is set again */
#define INVALIDATE_NONE        0 /* there was no artifact */
#define INVALIDATE_DELETED     1 /* the artifact is deleted */
#define PARK_FAST_FORWARD    100 /* bulk string: the artifact record (mode 'r'); not parked */
#define PARK_FREE              0 /* no lock stands; not parked (acquire again) */
#define PARK_EXISTS            1 /* {1, pttl}: the external artifact exists (mode 'x'); not parked */
#define PARK_PARKED            2 /* {2, pttl, lock}: the task token is on the waiter list */
#define PARK_CORRUPT           5 /* {5, error}: never here: the model's artifact is always a string */
#define REAP_HELD              0 /* no artifact, the lock stands: the waiters stay parked */
#define REAP_DONE              1 /* the artifact exists: the list is taken, to complete with it */
#define REAP_FREE              2 /* no artifact, no lock: the list is taken, to fail (they retry) */
#define REAP_CORRUPT           5 /* {5, error}: never here: the model's artifact is always a string */

/* ---- Which strategy: what acquire checks, and whether anything takes a lock. */
#if defined(NO_GUARD)
#define CHECKS_ARTIFACT 0
#define USES_LOCK 0
#elif defined(ARTIFACT_ONLY)
#define CHECKS_ARTIFACT 1
#define USES_LOCK 0
#else
#define CHECKS_ARTIFACT 1
#define USES_LOCK 1
#endif
#ifdef LOCK_ONLY
#undef CHECKS_ARTIFACT
#define CHECKS_ARTIFACT 0
#define COMMIT_DELETES_LOCK 0 /* success leaves the lock to its TTL */
#else
#define COMMIT_DELETES_LOCK 1
#endif
/* Whether a commit writes whatever stands: the seed's strategies write the artifact blindly. */
#if defined(NO_GUARD) || defined(ARTIFACT_ONLY) || defined(LOCK_ONLY) || defined(LATE_OVERWRITE)
#define COMMIT_WRITES_ANY 1
#else
#define COMMIT_WRITES_ANY 0
#endif

/* ---- Redis: the keys of the one (scope, step). A token is the invocation's number + 1. */
byte lock;        /* lock key l:<step>: the token in its record, 0 = no key */
bit  art;         /* artifact key a:<jobType> (or the external key x:<jobType>) exists */

/* ---- The Redis server clock (TIME), which never goes back. Only the order of its readings
 * matters, and every reading is at most `now`, so each is kept as one bit, "taken at the
 * current `now`": a reading taken earlier is smaller than any taken later. */
bit  lockNow;     /* the lock's TTL started (SET or PEXPIRE) at the current `now` */
bit  fenceNow;    /* ghost: the greatest fencing token handed out was read at the current `now` */

/* ---- The world's budgets. */
byte crashes, expiries, invalidations;

/* ---- Each invocation, and ghost state (what happened in the world, for the properties only). */
#define IDLE    0 /* not dispatched */
#define RUN     1 /* dispatched: the job is running */
#define PEND    2 /* the job succeeded; its result is not stored yet */
#define STORED  3 /* its result is stored in the artifact */
#define GONE    4 /* its stored result was invalidated or expired */
#define FAILED  5 /* the job failed (or was cancelled) */
#define DROPPED 6 /* the job succeeded late and its commit was refused: a newer holder's stands */
#define UNSTORED 7 /* the job succeeded; its result was delivered, not stored (over maxArtifactBytes,
                      or refused by the payload codec), and the lock is kept for lockTtlMs */
byte ph[N];       /* ghost: the phase of each invocation's dispatch */
bit  lapsed[N];   /* ghost: its lock expired while it was RUN or PEND (no renewal in time) */
bit  renewing[N]; /* alive between acquire and its settling call: renews its lease */
bit  held[N];     /* the lock is held for lockTtlMs after success (extend): external mode, or unstored */
bit  waiting[N];  /* ghost: got HELD, has not fast-forwarded or acquired yet */
bit  seenNow[N];  /* the invocation's last reply came at the current `now` */
byte nwait;       /* ghost: how many invocations are waiting (in the slot, or parked) */

/* ---- Parked waiters (park.lua, reap.lua): the waiter list w:<step>, and what each waiter is handed. */
#define HANDED_RESULT 1 /* completed with the stored result: by a commit, or a reap that found it */
#define HANDED_RETRY  2 /* failed retryably, so that it acquires again: by a release, or a reap */
bit  parked[N];   /* its task token is on the waiter list */
byte nparked;     /* how many task tokens the list holds (0: no list) */
byte handed[N];   /* what a parked waiter was handed over with, 0 = nothing yet */
#ifdef OLD_REAP
byte listLock;    /* the lock whose PTTL the list's TTL was last set from (its token), 0 = none */
#endif
byte q;           /* scratch for loops inside one atomic step; always 0 between steps */
byte tm;          /* scratch */

/* A dispatch still in flight: running, or resolved with its result not stored yet, and its
 * lease never expired. (A stored result is property 2's.) */
#define IN_FLIGHT(i) ((ph[i] == RUN || ph[i] == PEND) && !lapsed[i])

/* The clock moves on: every reading so far is now in the past. */
inline advance() {
  do
  :: q < N -> seenNow[q] = 0; q++
  :: else -> q = 0; break
  od;
  lockNow = 0; fenceNow = 0
}

/* The clock must have moved on since a reading taken at the current `now`. With COARSE_CLOCK
 * (a token of whole seconds) a round trip or a short TTL may end within the same tick. */
#ifdef COARSE_CLOCK
#define MUST_ADVANCE(taken) if :: taken -> advance() :: skip fi
#else
#define MUST_ADVANCE(taken) if :: taken -> advance() :: else -> skip fi
#endif

/* A script of invocation p runs a round trip after p's last reply, so at a later server time
 * than that reply; otherwise it may run at the same `now` as the last script. */
inline tick(p) {
  MUST_ADVANCE(seenNow[p]);
  seenNow[p] = 1
}

/* Every stored result is gone: invalidate.lua, or the artifact's TTL. */
inline resultsGone() {
  art = 0;
  do
  :: q < N -> if :: ph[q] == STORED -> ph[q] = GONE :: else -> skip fi; q++
  :: else -> q = 0; break
  od
}

/* The waiter list is taken, and every waiter on it handed over with `how`. */
inline handOver(how) {
  do
  :: q < N -> if :: parked[q] -> parked[q] = 0; handed[q] = how :: else -> skip fi; q++
  :: else -> q = 0; break
  od;
  nparked = 0
}

/* The waiter list is gone, and nobody is handed anything. */
inline dropList() {
  do
  :: q < N -> parked[q] = 0; q++
  :: else -> q = 0; break
  od;
  nparked = 0
}

/* The artifact record is written: by commit.lua, or by the job itself (external mode). */
inline storeResult(p) {
  art = 1;
  ph[p] = STORED
}

/* Delete the lock on behalf of invocation p.
 * PROPERTY 3 (safety of release): a release or commit never deletes a lock another holder owns. */
inline deleteLock(p) {
  if
  :: lock != p + 1 -> printf("@@ VIOLATION release safety: inv%d's release deletes the lock of inv%d\n", p, lock - 1)
  :: else -> skip
  fi;
  assert(lock == p + 1);
  lock = 0
}

/* ---- acquire.lua: fast-forward, acquire, or report the holder. */
inline acquire(p, r) {
  atomic {
    if
    :: CHECKS_ARTIFACT && art ->
#ifdef EXTERNAL
      r = ACQUIRE_EXISTS
#else
      r = ACQUIRE_FAST_FORWARD
#endif
    :: else ->
      if
      :: USES_LOCK && lock != 0 -> r = ACQUIRE_HELD
      :: else -> r = ACQUIRE_ACQUIRED
      fi
    fi;
    /* PROPERTY 2 (no lost result): while a committed result is stored (not invalidated, not
     * expired), no invocation dispatches again: each one that decides fast-forwards to it. */
    q = 0;
    do
    :: q < N ->
      if
      :: ph[q] == STORED && r == ACQUIRE_ACQUIRED ->
        printf("@@ VIOLATION no lost result: inv%d dispatches again though inv%d's result is stored\n", p, q);
        assert(false)
      :: else -> q++
      fi
    :: else -> q = 0; break
    od;
    if
    :: r == ACQUIRE_ACQUIRED ->
      /* PROPERTY 1 (no duplicate): a second dispatch happens only after each earlier one
       * failed, or its lease expired without renewal, or it stored its result (then property
       * 2 holds off every dispatch until that result is invalidated or expires). */
      do
      :: q < N ->
        if
#ifdef STRICT
        :: q != p && ph[q] == PEND ->
          printf("@@ VIOLATION strict no duplicate: inv%d dispatches while inv%d's job succeeded and its result is not stored yet\n", p, q);
          assert(false)
#endif
        :: q != p && IN_FLIGHT(q) ->
          printf("@@ VIOLATION no duplicate: inv%d dispatches while inv%d's dispatch still stands\n", p, q);
          assert(false)
        :: else -> q++
        fi
      :: else -> q = 0; break
      od;
      /* PROPERTY 4 (fencing): tokens handed out for this (scope, step) strictly increase.
       * The token is TIME. This script runs no earlier than the last one, and a round trip
       * after p's last reply; nothing else forces the clock forward. So it reads the same
       * TIME as the greatest token so far exactly when that was read at the current `now`
       * and p's last reply was not. */
      if
      :: fenceNow && !seenNow[p] -> printf("@@ VIOLATION fencing: inv%d gets the same token as the last dispatch\n", p)
      :: else -> skip
      fi;
      assert(!fenceNow || seenNow[p]);
      tick(p);
      fenceNow = 1;
      if :: USES_LOCK -> lock = p + 1; lockNow = 1 :: else -> skip fi;
      ph[p] = RUN; renewing[p] = 1;
      if :: waiting[p] -> waiting[p] = 0; nwait-- :: else -> skip fi;
      printf("@@ inv%d acquire -> ACQUIRED, dispatches the job\n", p)
    :: r == ACQUIRE_HELD ->
      if :: !waiting[p] -> waiting[p] = 1; nwait++ :: else -> skip fi;
      printf("@@ inv%d acquire -> HELD by inv%d, waits\n", p, lock - 1)
    :: else ->
      if :: waiting[p] -> waiting[p] = 0; nwait-- :: else -> skip fi;
      if
      :: r == ACQUIRE_EXISTS -> printf("@@ inv%d acquire -> EXISTS, fast-forwards to the external artifact\n", p)
      :: else -> printf("@@ inv%d acquire -> FAST_FORWARD to the stored result\n", p)
      fi
    fi
  }
}

/* ---- extend.lua: compare-and-expire. A lease renewal, or the hold after an external dispatch. */
inline extend(p, r) {
  atomic {
    tick(p);
    if
    :: USES_LOCK && lock == p + 1 -> lockNow = 1; r = EXTEND_HELD;
#ifdef OLD_REAP
      listLock = lock /* the list's TTL is set from the lock's too */
#endif
    :: else -> r = EXTEND_LOST
    fi;
    if
    :: r == EXTEND_HELD -> printf("@@ inv%d extend -> 1 (lease renewed)\n", p)
    :: else -> printf("@@ inv%d extend -> 0 (lost: the lock is not ours; nothing changed)\n", p)
    fi
  }
}

/* ---- extend.lua once more, after an external dispatch succeeded: hold the lock for lockTtlMs,
 * no longer renewed, until the job's own artifact takes over. */
inline hold(p, r) {
  atomic {
    tick(p);
    if
    :: lock == p + 1 -> lockNow = 1; held[p] = 1; r = EXTEND_HELD;
#ifdef OLD_REAP
      listLock = lock;
#endif
      printf("@@ inv%d extend -> 1 (lock held for lockTtlMs, no longer renewed)\n", p)
    :: else -> r = EXTEND_LOST; printf("@@ inv%d extend -> 0 (lost before the hold)\n", p)
    fi;
    renewing[p] = 0
  }
}

/* ---- extend.lua with 'take', after a job that succeeded with a result in hand that is not
 * stored (over maxArtifactBytes, or refused by the payload codec): hold the lock for lockTtlMs, no
 * longer renewed, and take the waiter list in the same step. The waiters are completed with the
 * result (over maxArtifactBytes), or failed with the codec's error so that they retry, as Temporal
 * fails the holder (refused by the codec). Later invocations wait on the lock until it expires. */
inline keep(p, r) {
  atomic {
    tick(p);
    ph[p] = UNSTORED;
    if
    :: lock == p + 1 -> lockNow = 1; held[p] = 1; r = EXTEND_HELD;
      if
      :: true -> handOver(HANDED_RESULT); printf("@@ inv%d extend take -> 1 (lock held for lockTtlMs; waiters completed with the unstored result)\n", p)
#ifdef CODEC_COMPLETES
      :: true -> dropList(); printf("@@ inv%d extend take -> 1 (lock held for lockTtlMs; waiters taken, their completion refused by the codec)\n", p)
#else
      :: true -> handOver(HANDED_RETRY); printf("@@ inv%d extend take -> 1 (lock held for lockTtlMs; waiters failed with the codec's error, to retry)\n", p)
#endif
      fi
    :: else -> r = EXTEND_LOST; printf("@@ inv%d extend take -> 0 (lost before the hold)\n", p)
    fi;
    renewing[p] = 0
  }
}

/* ---- commit.lua: with our lock, write the artifact and delete the lock in the same step. A
 * late holder writes only into an empty slot (no lock, no artifact), and is refused otherwise. */
inline commit(p, r) {
  atomic {
    tick(p);
    if
    :: COMMIT_WRITES_ANY || lock == p + 1 || (lock == 0 && !art) ->
      /* PROPERTY 6 (one result): a stored result is never replaced by another invocation's
       * commit; every invocation that fast-forwards while it stands gets that same result. */
      do
      :: q < N ->
        if
        :: q != p && ph[q] == STORED ->
          printf("@@ VIOLATION one result: inv%d's commit replaces the stored result of inv%d\n", p, q);
          assert(false)
        :: else -> q++
        fi
      :: else -> q = 0; break
      od;
      storeResult(p);
      if
      :: COMMIT_DELETES_LOCK && lock == p + 1 -> deleteLock(p); r = COMMIT_OURS
      :: else -> r = COMMIT_NOT_OURS
      fi;
      handOver(HANDED_RESULT)
    :: else -> ph[p] = DROPPED; r = COMMIT_REFUSED
    fi;
    renewing[p] = 0;
    if
    :: r == COMMIT_OURS -> printf("@@ inv%d commit -> 1 (artifact written, our lock deleted)\n", p)
    :: r == COMMIT_NOT_OURS -> printf("@@ inv%d commit -> 0 (artifact written; no lock of ours to delete)\n", p)
    :: else -> printf("@@ inv%d commit -> 2 (refused: a newer holder's lock or result stands)\n", p)
    fi
  }
}

/* ---- release.lua: compare-and-delete, on failure only (or, RELEASE_ON_ANY, on any resolution). */
inline release(p, r) {
  atomic {
    tick(p);
    if
#ifdef PLAIN_DEL
    :: lock != 0 -> deleteLock(p); handOver(HANDED_RETRY); r = RELEASE_DELETED /* DEL whoever holds it */
#else
    :: lock == p + 1 -> deleteLock(p); handOver(HANDED_RETRY); r = RELEASE_DELETED
#endif
    :: else -> r = RELEASE_REFUSED
    fi;
    renewing[p] = 0;
    if
    :: r == RELEASE_DELETED -> printf("@@ inv%d release -> 1 (lock deleted)\n", p)
    :: else -> printf("@@ inv%d release -> 0 (refused: the lock is not ours; nothing changed)\n", p)
    fi
  }
}

/* ---- park.lua: re-check the artifact and the lock; on a held lock, put the task token on the list. */
inline park(p, r) {
  atomic {
    tick(p);
    if
    :: art ->
#ifdef EXTERNAL
      r = PARK_EXISTS
#else
      r = PARK_FAST_FORWARD
#endif
    :: !art && lock != 0 -> r = PARK_PARKED; parked[p] = 1; nparked++;
#ifdef OLD_REAP
      listLock = lock /* the list's TTL: the lock's PTTL plus the grace */
#endif
    :: !art && lock == 0 -> r = PARK_FREE
    fi;
    if
    :: r == PARK_PARKED -> printf("@@ inv%d park -> PARKED on the lock of inv%d (holds no slot)\n", p, lock - 1)
    :: r == PARK_FREE -> printf("@@ inv%d park -> FREE (no lock stands: acquire again)\n", p)
    :: else -> waiting[p] = 0; nwait--; printf("@@ inv%d park -> fast-forwards to the result\n", p)
    fi
  }
}

/* ---- reap.lua, by the worker that parked invocation p, every poll interval while it waits:
 * hand the list over if the artifact exists or the lock is gone. The worker then stops
 * watching p (ParkedWatch forgets every token it had parked there). */
inline reap(p, r) {
  atomic {
    tick(p);
    if
    :: art -> r = REAP_DONE; handOver(HANDED_RESULT)
    :: !art && lock != 0 -> r = REAP_HELD /* the list's TTL: the lock's PTTL plus the grace (not with OLD_REAP) */
    :: !art && lock == 0 -> r = REAP_FREE; handOver(HANDED_RETRY)
    fi;
    if
    :: r == REAP_HELD -> printf("@@ inv%d reap -> HELD (stays parked)\n", p)
    :: r == REAP_DONE -> printf("@@ inv%d reap -> DONE (the list is completed with the result)\n", p)
    :: else -> printf("@@ inv%d reap -> FREE (the list is failed, to retry)\n", p)
    fi;
    /* PROPERTY 7 (no stranded waiter): a worker stops watching a parked waiter only once it has
     * been handed over (completed, or failed so that it retries). A waiter nobody hands over
     * would stall until its own start-to-close timeout. */
    if
    :: r != REAP_HELD && handed[p] == 0 ->
      printf("@@ VIOLATION no stranded waiter: inv%d's worker stops watching it, and nobody handed it over\n", p);
      assert(false)
    :: else -> skip
    fi
  }
}

/* ---- invalidate.lua: delete the artifact. A lock in flight is not touched. */
inline invalidate() {
  tm = (art -> INVALIDATE_DELETED : INVALIDATE_NONE);
  resultsGone();
  printf("@@ operator invalidate -> %d\n", tm);
  tm = 0
}

/* A holder may crash before any of its calls: it never calls Redis again. */
#define CRASH_POINT \
  if \
  :: crashes < MAX_CRASH -> atomic { crashes++; renewing[p] = 0; printf("@@ inv%d crashes\n", p) }; goto out \
  :: skip \
  fi

/* ---- One invocation: an activity execution guarded for the (scope, step). */
proctype Inv(byte p) {
  byte r; /* the reply of its last script */
retry:
  acquire(p, r);
  if
  :: r == ACQUIRE_HELD ->
    if
    :: goto retry /* wait in the slot ('wait'): woken by a publish, or by a poll */
    /* A plain guard first: begun with park's script (the clock's `if … :: else` first), the
     * option was never taken by the search beside `goto retry` (docs/model.md; OLD_REAP fails
     * only if it is). */
    :: p < PARKERS; park(p, r); /* park ('park', the default): hold no slot until handed over */
      if
      :: r == PARK_FREE -> goto retry
      :: r == PARK_FAST_FORWARD || r == PARK_EXISTS -> goto out
      :: r == PARK_PARKED ->
        do
        :: handed[p] == HANDED_RESULT -> atomic { handed[p] = 0; waiting[p] = 0; nwait--; printf("@@ inv%d is completed with the result\n", p) }; goto out
        :: handed[p] == HANDED_RETRY -> atomic { handed[p] = 0; printf("@@ inv%d is failed, and retries\n", p) }; goto retry
        :: handed[p] == 0 -> reap(p, r)
        od
      fi
    fi
  :: r == ACQUIRE_FAST_FORWARD || r == ACQUIRE_EXISTS -> goto out /* done */
  :: r == ACQUIRE_ACQUIRED -> skip
  fi;
  /* Dispatched. The job runs; the lease is renewed every third of it. */
  CRASH_POINT;
  if
  :: extend(p, r)
  :: skip
  fi;
  CRASH_POINT;
  /* The job resolves. A lost lease aborts the signal, but the job may still succeed: then the
   * commit below is a late commit: it writes only if no newer holder's lock or result stands. */
  if
  :: atomic { ph[p] = PEND; printf("@@ inv%d job resolves: success\n", p) }
  :: atomic { ph[p] = FAILED; printf("@@ inv%d job resolves: failure\n", p) }
  fi;
  CRASH_POINT;
  if
  :: ph[p] == FAILED -> release(p, r)
  :: else ->
#if defined(RELEASE_ON_ANY)
    release(p, r);
#ifndef EXTERNAL
    CRASH_POINT;
    atomic { tick(p); storeResult(p); printf("@@ inv%d writes the artifact\n", p) }
#endif
#elif defined(EXTERNAL)
    hold(p, r) /* extend.lua to lockTtlMs: the job's own artifact takes over */
#else
    if
    :: commit(p, r)
    :: p < KEEPERS; keep(p, r) /* the result is delivered, not stored */
    fi
#endif
  fi;
out:
  atomic { r = 0; seenNow[p] = 0 } /* forget what no longer matters, so that states merge */
}

#ifdef EXTERNAL
/* The job of invocation p, outside the worker: once it resolved it writes the artifact itself,
 * whether or not the activity's worker is still alive. */
proctype Job(byte p) {
end:
  atomic { ph[p] == PEND -> storeResult(p); printf("@@ job of inv%d writes the external artifact\n", p) }
}
#endif

/* Time passing, and the operator. Each option is one nondeterministic event. */
active proctype World() {
end:
  do
  /* The lock of a holder that no longer renews it (crashed, or done) expires. Assumption of the
   * external mode: lockTtlMs outlasts the job's gap between resolving and writing its artifact,
   * so a held lock does not expire while the job still owes the artifact. */
  :: atomic {
      lock != 0 && !renewing[lock - 1] && !(held[lock - 1] && ph[lock - 1] == PEND) ->
      MUST_ADVANCE(lockNow); /* a TTL of >= 1 ms ran out */
      if :: ph[lock - 1] == RUN || ph[lock - 1] == PEND -> lapsed[lock - 1] = 1 :: else -> skip fi;
      printf("@@ clock: the lock of inv%d expires (no longer renewed)\n", lock - 1);
      lock = 0
    }
  /* A live holder's lease lapses: it paused longer than the lease, so no renewal came in time. */
  :: atomic {
      lock != 0 && renewing[lock - 1] && expiries < MAX_EXPIRE ->
      expiries++;
      MUST_ADVANCE(lockNow); /* a TTL of >= 1 ms ran out */
      lapsed[lock - 1] = 1;
      printf("@@ clock: the lease of inv%d lapses before its next call (inv%d paused)\n", lock - 1, lock - 1);
      lock = 0
    }
#ifdef OLD_REAP
  /* The waiter list's TTL runs out under the lock of a holder that took over: its TTL was set
   * from an earlier lock, and neither a reap nor that holder's renewal set it since. (The real
   * reap sets it from whichever lock stands, and a worker reaps at least every quarter of the
   * grace, so a list outlives every lock while its waiters' worker lives: assumption A5.) */
  :: atomic {
      nparked > 0 && lock != 0 && lock != listLock ->
      printf("@@ clock: the waiter list expires under the lock of inv%d\n", lock - 1);
      dropList()
    }
#endif
  /* The artifact's TTL runs out. */
  :: atomic { art && expiries < MAX_EXPIRE -> expiries++; resultsGone(); printf("@@ clock: the artifact expires\n") }
  /* An operator invalidates the result (fire-once invalidate). */
  :: atomic { invalidations < MAX_INVALIDATE -> invalidations++; invalidate() }
  od
}

init {
  atomic {
    do
    :: q < N ->
      run Inv(q);
#ifdef EXTERNAL
      run Job(q);
#endif
      q++
    :: else -> q = 0; break
    od
  }
}

/* PROPERTY 5 (liveness under weak fairness, spin -a, pan -a -f): once holders stop crashing,
 * every waiter eventually fast-forwards or acquires: there is always a later moment with no one
 * waiting. Checked on the real protocol only. */
ltl live { [] <> (nwait == 0) }
