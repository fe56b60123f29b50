--[[
  extend: compare-and-expire of the lock. Renews a lease while the activity runs, and sets the
  hold-after-success TTL when an external-artifact dispatch completes.

  KEYS[1]  lock key of (scope, step)
  KEYS[2]  fencing counter of (scope, step)

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  new lock TTL in milliseconds (positive integer)
  ARGV[3]  fencing counter TTL in milliseconds (positive integer)

  Returns:
    1  the lock held ARGV[1]; its TTL is now ARGV[2], the counter's ARGV[3]
    0  lost: the lock is missing or another holder's; nothing is changed
]]
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
return 0
