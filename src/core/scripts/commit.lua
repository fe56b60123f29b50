--[[
  commit: store the result artifact of a successful dispatch. Called only on success.

  KEYS[1]  artifact key of (scope, jobType)
  KEYS[2]  lock key of (scope, step)

  ARGV[1]  token the caller acquired the lock with
  ARGV[2]  artifact payload bytes
  ARGV[3]  artifact TTL in milliseconds (positive integer)
  ARGV[4]  args hash of the call that produced it ('' if not checked)
  ARGV[5]  pub/sub channel to wake waiters on, or '' for none

  Writes the artifact hash {p = payload, h = args hash} with its TTL and, if the lock is still
  ours, marks it committed (c = '1'). The lock is never deleted: on success it runs out by its own
  TTL while the artifact takes over, so no moment exists with neither lock nor artifact; once the
  artifact is gone, acquire.lua replaces a committed lock. Publishes ARGV[5] so waiters re-check.

  Returns:
    1  the artifact is written and the lock still held ARGV[1]
    0  the artifact is written, but the lock had expired or passed to another holder
]]
-- HSET first: under maxmemory Redis refuses it with OOM before anything is written (a leading
-- DEL would be allowed, and would let the rest of the script write past the limit). The hash
-- only ever has these two fields, so overwriting them replaces any earlier artifact whole.
redis.call('HSET', KEYS[1], 'p', ARGV[2], 'h', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], 'commit')
end
if redis.call('HGET', KEYS[2], 't') == ARGV[1] then
  redis.call('HSET', KEYS[2], 'c', '1')
  return 1
end
return 0
