--[[
  commit (protocol v3): store the result artifact of a successful dispatch. Called only on success.

  KEYS[1]  artifact of (scope, jobType)
  KEYS[2]  lock of (scope, step)
  KEYS[3]  parked waiters of (scope, step): a list of waiter entries,
           'w:<argsHash>:<task token>' (PROTOCOL.md §4)
  All three carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  artifact record: '3:<argsHash>:<payload>'
  ARGV[3]  artifact TTL in milliseconds (positive integer)
  ARGV[4]  pub/sub channel to wake waiters on, or '' for none

  While the lock is ours: writes the artifact with its TTL and, in the same atomic step, deletes
  the lock: the artifact takes over from the lock with no moment between them in which neither
  stands. A late caller (its lock expired, or `fire-once release --force` took it) writes only
  into an empty slot: no lock and no artifact. It never replaces the result of a dispatch that
  started after it, nor one whose lock stands: one result per (scope, step), the newest holder's.
  Publishes on ARGV[4] so that waiters re-check, and hands the parked waiters to the caller, who
  completes them with the result.

  Returns:
    1 or 0                the artifact is written; 1 if the lock still held ARGV[1] (and is now
                          deleted), 0 if no lock stood (it had expired or been released)
    {1 or 0, waiter...}   the same, and the parked waiters' entries, now removed from KEYS[3]
    2                     refused, nothing changed: another holder's lock stands, or no lock stands
                          and KEYS[1] holds another record (a later holder's result). The same
                          record already stored counts as written (a resent commit).

  Under maxmemory the first write, SET, is refused with OOM before anything is written.
]]
local ours = 0
local lock = redis.call('GET', KEYS[2])
if lock then
  if string.sub(lock, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then return 2 end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  redis.call('DEL', KEYS[2])
  ours = 1
elseif not redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3], 'NX') and redis.pcall('GET', KEYS[1]) ~= ARGV[2] then
  return 2
end
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], 'commit')
end
local waiters = redis.call('LRANGE', KEYS[3], 0, -1)
if #waiters == 0 then return ours end
redis.call('DEL', KEYS[3])
table.insert(waiters, 1, ours)
return waiters
