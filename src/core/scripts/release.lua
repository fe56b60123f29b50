--[[
  release (protocol v3): compare-and-delete of the lock. Called only on the failure branch.

  KEYS[1]  lock of (scope, step)
  KEYS[2]  parked waiters of (scope, step): a list of waiter entries,
           'w:<argsHash>:<task token>' (PROTOCOL.md §4)
  Both carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  pub/sub channel to wake waiters on after a delete, or '' for none

  Deletes the lock only if it still holds ARGV[1]; then wakes waiters and hands the parked ones
  to the caller, who fails them so that they retry and one of them acquires. A lock that expired
  or passed to another holder is left alone, and so are its waiters: they wait for that holder.

  Returns:
    0                     refused: the lock is missing or another holder's; nothing is changed
    1                     the lock held ARGV[1] and is deleted
    {1, waiter...}        the same, and the parked waiters' entries, now removed from KEYS[2]
]]
local lock = redis.call('GET', KEYS[1])
if not lock or string.sub(lock, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], 'release')
end
local waiters = redis.call('LRANGE', KEYS[2], 0, -1)
if #waiters == 0 then return 1 end
redis.call('DEL', KEYS[2])
table.insert(waiters, 1, 1)
return waiters
