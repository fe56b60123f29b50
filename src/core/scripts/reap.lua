--[[
  reap (protocol v3): hand over the parked waiters of a lock that no commit or release will hand
  over: its artifact exists without a commit of ours (external mode: the job wrote it), or the lock
  vanished with no commit and no release (its holder died and the lease expired). A worker that
  parked waiters calls it now and then for their (scope, step).

  KEYS[1]  artifact of (scope, jobType) in mode 'r', or the external artifact key in mode 'x'
  KEYS[2]  lock of (scope, step)
  KEYS[3]  parked waiters of (scope, step): a list of waiter entries,
           'w:<argsHash>:<task token>' (PROTOCOL.md §4)
  All three carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  artifact mode: 'r' or 'x', as in park.lua
  ARGV[2]  grace in milliseconds (positive integer), as in park.lua: while the lock stands, the
           list lives the lock's PTTL plus this. The lock may be another holder's than the one the
           waiters parked on (theirs expired and another invocation took over): its commit or
           release hands them over as long as the list outlives it, which its own renewals alone
           do not ensure ('fixed' mode never renews; a long lease renews less often than the grace)

  Returns one of (the names are those of REAP_REPLY in scripts.ts):
    0                        HELD: no artifact, and the lock stands; the waiters stay parked,
                             and their list (if any) now lives the lock's PTTL plus ARGV[2]
    {1, record, waiter...}   DONE: the artifact exists; its record ('r'), or '' ('x'), and the
                             parked waiters' entries, now removed from KEYS[3]
    {2, waiter...}           FREE: no artifact and no lock; the parked waiters' entries, now
                             removed from KEYS[3], to be failed so that they retry
    {5, error}               CORRUPT ('r'): KEYS[1] holds something that is not a string;
                             nothing is changed

  Its writes are DEL and PEXPIRE, which Redis allows under maxmemory; each is the script's last.
]]
local record = false
if ARGV[1] ~= 'x' then
  local artifact = redis.pcall('GET', KEYS[1])
  if type(artifact) == 'table' then return {5, artifact.err} end
  record = artifact
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  record = ''
end
if not record then
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl ~= -2 then
    redis.call('PEXPIRE', KEYS[3], math.max(pttl, 0) + tonumber(ARGV[2]))
    return 0
  end
end
local waiters = redis.call('LRANGE', KEYS[3], 0, -1)
redis.call('DEL', KEYS[3])
if record then
  table.insert(waiters, 1, record)
  table.insert(waiters, 1, 1)
else
  table.insert(waiters, 1, 2)
end
return waiters
