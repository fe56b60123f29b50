--[[
  commit (protocol v3): store the result artifact of a successful dispatch. Called only on success.

  KEYS[1]  artifact of (scope, jobType)
  KEYS[2]  lock of (scope, step)
  KEYS[3]  parked waiters of (scope, step): a list of task tokens
  All three carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  artifact record: '3:<argsHash>:<payload>'
  ARGV[3]  artifact TTL in milliseconds (positive integer)
  ARGV[4]  pub/sub channel to wake waiters on, or '' for none

  Writes the artifact with its TTL and, in the same atomic step, deletes the lock if it is still
  ours: the artifact takes over from the lock with no moment between them in which neither
  stands. A lock that expired or passed to another holder is left alone. Publishes on ARGV[4] so
  that waiters re-check, and hands the parked waiters to the caller, who completes them with the
  result.

  Returns:
    1 or 0                the artifact is written; 1 if the lock still held ARGV[1] (and is now
                          deleted), 0 if it had expired or passed to another holder
    {1 or 0, waiter...}   the same, and the parked waiters' task tokens, now removed from KEYS[3]

  Under maxmemory the first write, SET, is refused with OOM before anything is written.
]]
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local ours = 0
local lock = redis.call('GET', KEYS[2])
if lock and string.sub(lock, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('DEL', KEYS[2])
  ours = 1
end
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], 'commit')
end
local waiters = redis.call('LRANGE', KEYS[3], 0, -1)
if #waiters == 0 then return ours end
redis.call('DEL', KEYS[3])
table.insert(waiters, 1, ours)
return waiters
