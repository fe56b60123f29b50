--[[
  acquire: the whole fire-once decision for one (scope, step), in one round trip.

  KEYS[1]  artifact key of (scope, jobType)
  KEYS[2]  lock key of (scope, step)
  Both keys carry the same {scope} hash tag, so they share a Redis Cluster slot.

  ARGV[1]  token: a fresh random value owned by this caller alone
  ARGV[2]  lock TTL in milliseconds (positive integer)
  ARGV[3]  artifact mode:
             'result'  the artifact is a string written by commit.lua; return its bytes
             'exists'  the artifact is written by someone else, of any type; only test it exists

  Returns one of:
    {1, artifact}  fast-forward: the artifact exists. 'result': its bytes. 'exists': ''.
                   The lock is neither read nor written.
    {2}            acquired: the lock did not exist and now holds ARGV[1] with TTL ARGV[2].
    {3, pttl}      held: the lock exists with another value; pttl is its remaining TTL in
                   milliseconds as PTTL reports it (-1 if it has none).
]]
if ARGV[3] == 'result' then
  local artifact = redis.call('GET', KEYS[1])
  if artifact then
    return {1, artifact}
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return {1, ''}
end

if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2}
end

return {3, redis.call('PTTL', KEYS[2])}
