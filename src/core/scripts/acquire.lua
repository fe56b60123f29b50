--[[
  acquire: the whole fire-once decision for one (scope, step), in one round trip.

  KEYS[1]  artifact key of (scope, jobType)
  KEYS[2]  lock key of (scope, step): a hash {t = token, o = holder, h = args hash, f = fencing,
           c = '1' once its holder committed an artifact}
  KEYS[3]  fencing counter of (scope, step)
  All keys carry the same {scope} hash tag, so they share a Redis Cluster slot.

  ARGV[1]  token: a fresh random value owned by this caller alone
  ARGV[2]  lock TTL in milliseconds (positive integer): the lease, or the fixed TTL
  ARGV[3]  artifact mode:
             'result'  the artifact is a hash {p = payload, h = args hash} written by commit.lua
             'exists'  the artifact is written by someone else, of any type; only test it exists
  ARGV[4]  holder: who asks (workflow ID, run ID, activity ID); a later attempt of the same
           activity has the same holder
  ARGV[5]  args hash of this call, or '' to skip payload-conflict checks
  ARGV[6]  TTL of the fencing counter in milliseconds (positive integer)

  Returns one of:
    {1, payload, pttl}        fast-forward: the artifact exists. 'result': its payload bytes and
                              its remaining TTL in ms; 'exists': '' and its PTTL. Lock untouched.
    {2, fencing}              acquired: the lock now holds ARGV[1] with TTL ARGV[2]; fencing is
                              the counter's new value, higher than any earlier holder's. A lock
                              whose holder committed (c = '1') no longer guards anything once its
                              artifact is gone (expired or invalidated): it is replaced.
    {3, pttl, holder, fencing} held by another token; pttl is the lock's remaining TTL in ms,
                              holder and fencing are the current holder's.
    {4, where, stored}        conflict: ARGV[5] differs from the args hash stored with the
                              artifact (where = 'artifact') or with the lock of a different
                              holder (where = 'lock'); stored is that hash. Nothing is written.
    {5, what}                 corrupt ('result' mode): the artifact key holds something commit.lua
                              never writes (another type, or a hash without its payload); what
                              says which. Nothing is written; the key is left for inspection.

  Under maxmemory the first write is INCR, which Redis refuses with OOM before anything is
  written: a script may not start with a DEL, which Redis allows under OOM and after which it
  lets the script's other writes through.
]]
local check = ARGV[5] ~= ''

if ARGV[3] == 'result' then
  local kind = redis.call('TYPE', KEYS[1]).ok
  if kind ~= 'none' and kind ~= 'hash' then
    return {5, 'an artifact of type ' .. kind}
  end
  local artifact = redis.call('HMGET', KEYS[1], 'p', 'h')
  if kind == 'hash' and not artifact[1] then
    return {5, 'an artifact hash without its payload field'}
  end
  if artifact[1] then
    if check and artifact[2] and artifact[2] ~= '' and artifact[2] ~= ARGV[5] then
      return {4, 'artifact', artifact[2]}
    end
    return {1, artifact[1], redis.call('PTTL', KEYS[1])}
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return {1, '', redis.call('PTTL', KEYS[1])}
end

local lock = redis.call('HMGET', KEYS[2], 'o', 'h', 'f', 'c')
if lock[1] and lock[4] ~= '1' then
  if check and lock[1] ~= ARGV[4] and lock[2] and lock[2] ~= '' and lock[2] ~= ARGV[5] then
    return {4, 'lock', lock[2]}
  end
  return {3, redis.call('PTTL', KEYS[2]), lock[1] or '', tonumber(lock[3]) or 0}
end

local fencing = redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
redis.call('HSET', KEYS[2], 't', ARGV[1], 'o', ARGV[4], 'h', ARGV[5], 'f', fencing)
if lock[4] then
  redis.call('HDEL', KEYS[2], 'c') -- it replaces a committed lock whose artifact is gone
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {2, fencing}
