--[[
  commit: store the result artifact of a successful dispatch. Called only on success.

  KEYS[1]  artifact key of (scope, jobType)
  KEYS[2]  lock key of (scope, step)

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  artifact bytes
  ARGV[3]  artifact TTL in milliseconds (positive integer)

  The lock is never touched: on success it runs out by its own TTL while the artifact takes
  over, so no moment exists with neither lock nor artifact.

  Returns:
    1  the artifact is written and the lock still held ARGV[1]
    0  the artifact is written, but the lock had expired or passed to another holder
]]
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  return 1
end
return 0
