--[[
  release: compare-and-delete of the lock. Called only on the failure branch.

  KEYS[1]  lock key of (scope, step)

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  pub/sub channel to wake waiters on after a delete, or '' for none

  Returns:
    1  the lock held ARGV[1] and is deleted
    0  refused: the lock is missing or belongs to another holder, and is left as it is
]]
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], 'release')
  end
  return 1
end
return 0
