--[[
  release: compare-and-delete of the lock. Called only on the failure branch.

  KEYS[1]  lock key of (scope, step)

  ARGV[1]  token the caller acquired the lock with

  Returns:
    1  the lock held ARGV[1] and is deleted
    0  refused: the lock is missing or belongs to another holder, and is left as it is
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
