--[[
  force-release: `fire-once release --force`. Delete the lock only if it is still what the CLI
  showed a moment before (same Redis type, same token), and wake the scope's waiters as a failure
  release does. A lock taken over in between is left alone.

  KEYS[1]  lock key of (scope, step)

  ARGV[1]  the lock's Redis type as read ('hash' for every lock the guard wrote)
  ARGV[2]  its token as read (field t), or '' if it had none
  ARGV[3]  pub/sub channel to wake waiters on after the delete

  Returns:
    1  deleted
    0  refused: the lock is gone, or is another type or another holder's now
]]
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= ARGV[1] then return 0 end
if kind == 'hash' and (redis.call('HGET', KEYS[1], 't') or '') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'release')
return 1
