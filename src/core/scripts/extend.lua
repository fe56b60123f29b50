--[[
  extend (protocol v3): compare-and-expire of the lock. Renews a lease while the activity runs,
  and holds the lock after a dispatch that ends without an artifact of ours.

  KEYS[1]  lock of (scope, step)
  KEYS[2]  parked waiters of (scope, step)
  Both carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  new lock TTL in milliseconds (positive integer)
  ARGV[3]  new TTL of the parked-waiter list in milliseconds (positive integer): the lock's TTL
           plus the grace in which a waiter's own worker notices the lock is gone; ignored with
           ARGV[4] 'take', which removes the list
  ARGV[4]  optional: 'take' to hand the parked waiters over instead, after a dispatch whose result
           is in hand but not stored (they get that result now, not a second dispatch once the
           lock expires, if the caller can complete them); ARGV[2] may then be '' to leave the
           lock's TTL as it is ('fixed' mode)

  Returns:
    1                  the lock held ARGV[1]; its TTL is now ARGV[2], and the waiter list's (if
                       any) ARGV[3]
    {1, waiter...}     with ARGV[4] 'take': the same, and the parked waiters' entries, now
                       removed from KEYS[2]
    0                  lost: the lock is missing or another holder's; nothing is changed
]]
local lock = redis.call('GET', KEYS[1])
if not lock or string.sub(lock, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  return 0
end
if ARGV[2] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if ARGV[4] ~= 'take' then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
local waiters = redis.call('LRANGE', KEYS[2], 0, -1)
if #waiters == 0 then return 1 end
redis.call('DEL', KEYS[2])
table.insert(waiters, 1, 1)
return waiters
