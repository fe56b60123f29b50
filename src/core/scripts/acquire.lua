--[[
  acquire (protocol v3): the whole fire-once decision for one (scope, step), in one round trip.

  KEYS[1]  artifact of (scope, jobType): '<prefix>:v3:{<ns>/<scope>}:a:<jobType>' in mode 'r',
           or the external artifact key in mode 'x'
  KEYS[2]  lock of (scope, step): '<prefix>:v3:{<ns>/<scope>}:l:<step>'
  Both carry the same {<ns>/<scope>} hash tag, so they share a Redis Cluster slot.

  ARGV[1]  token: fresh random, owned by this caller alone; never contains a space
  ARGV[2]  lock TTL in milliseconds (positive integer): the lease, or the fixed TTL
  ARGV[3]  artifact mode:
             'r'  the artifact is a string written by commit.lua; a fast-forward returns it whole
             't'  as 'r', and a fast-forward returns its PTTL too (for a cache that must not
                  outlive it)
             'x'  the artifact is written by someone else, of any type; only test that it exists
  ARGV[4]  the rest of the lock record: '<argsHash> <holder>' (args hash may be empty)

  Returns one of (the names are those of ACQUIRE_REPLY in scripts.ts):
    <bulk string>         FAST_FORWARD ('r'): the artifact record '3:<argsHash>:<payload>'. The
                          caller checks the args hash: nothing is decided here on its behalf.
    {artifact, pttl}      FAST_FORWARD ('t'): the same record, and its PTTL in ms.
    {1, pttl}             EXISTS ('x'): the external artifact exists; its PTTL in ms.
    <integer>             ACQUIRED: the lock now holds '<ARGV[1]> <fencing> <ARGV[4]>' with TTL
                          ARGV[2]; the integer is the fencing token, the server clock in
                          microseconds (TIME). A lock lives from one round trip to another, so the
                          next holder of this (scope, step) reads a later clock: tokens strictly
                          increase as long as the server clock does not step back by more than a
                          lock's life.
    {3, pttl, lock}       HELD: another token holds the lock; its PTTL in ms and its record.
    {5, error}            CORRUPT ('r', 't'): KEYS[1] holds something that is not a string.

  Under maxmemory the only write, SET, comes last: Redis refuses it with OOM and nothing is written.
]]
if ARGV[3] ~= 'x' then
  local artifact = redis.pcall('GET', KEYS[1])
  if artifact then
    if type(artifact) == 'table' then return {5, artifact.err} end
    if ARGV[3] == 't' then return {artifact, redis.call('PTTL', KEYS[1])} end
    return artifact
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return {1, redis.call('PTTL', KEYS[1])}
end

local lock = redis.call('GET', KEYS[2])
if lock then
  return {3, redis.call('PTTL', KEYS[2]), lock}
end

-- The fencing token in decimal: seconds, then microseconds padded to six digits. The same digits
-- as formatting the sum, which cost a script call about 3 us more on Redis 7.0 (bench/RESULTS.md).
local now = redis.call('TIME')
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. now[1] .. string.sub('00000' .. now[2], -6) .. ' ' .. ARGV[4], 'PX', ARGV[2])
return now[1] * 1000000 + now[2]
