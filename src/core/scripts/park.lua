--[[
  park (protocol v3): register a waiter on a held lock, so that it waits without holding a worker
  slot. The artifact and the lock are re-checked in the same atomic step, so a waiter never parks
  on a lock that is already gone (its commit or release would never hand it over).

  KEYS[1]  artifact of (scope, jobType) in mode 'r', or the external artifact key in mode 'x'
  KEYS[2]  lock of (scope, step)
  KEYS[3]  parked waiters of (scope, step): a list of waiter entries,
           'w:<argsHash>:<task token>' (PROTOCOL.md §4)
  All three carry the same {<ns>/<scope>} hash tag.

  ARGV[1]  artifact mode: 'r' (a string written by commit.lua) or 'x' (written by someone else,
           of any type; only its existence is tested)
  ARGV[2]  the waiter's entry: 'w:<argsHash>:<task token>', its args hash (or empty) and its
           activity task token (raw bytes)
  ARGV[3]  grace in milliseconds (positive integer): the list lives the lock's PTTL plus this, so
           a waiter's worker can still notice a lock that vanished without a commit or a release

  Returns one of (the names are those of PARK_REPLY in scripts.ts):
    <bulk string>         FAST_FORWARD ('r'): the artifact record '3:<argsHash>:<payload>'; not parked
    {1, pttl}             EXISTS ('x'): the external artifact exists; not parked
    0                     FREE: no lock stands; not parked (acquire again)
    {2, pttl, lock}       PARKED: ARGV[2] is appended to KEYS[3]; the lock's PTTL and record
    {5, error}            CORRUPT ('r'): KEYS[1] holds something that is not a string

  Under maxmemory the first write, RPUSH, is refused with OOM before anything is written.
]]
if ARGV[1] ~= 'x' then
  local artifact = redis.pcall('GET', KEYS[1])
  if artifact then
    if type(artifact) == 'table' then return {5, artifact.err} end
    return artifact
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return {1, redis.call('PTTL', KEYS[1])}
end

local lock = redis.call('GET', KEYS[2])
if not lock then
  return 0
end
local pttl = redis.call('PTTL', KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[3], math.max(pttl, 0) + tonumber(ARGV[3]))
return {2, pttl, lock}
