--[[
  invalidate (protocol v3): delete a result artifact so that the next invocation dispatches
  again, and tell every worker's local artifact cache to drop it.

  KEYS[1]  artifact of (scope, jobType)

  ARGV[1]  pub/sub channel of the namespace's cache invalidations, or '' for none

  Publishes KEYS[1] on ARGV[1] whether or not the artifact existed, so a cache can never keep
  serving a copy that Redis no longer has. A lock in flight is not touched: invalidation ends a
  finished result, not a running dispatch.

  Returns:
    1  the artifact existed and is deleted
    0  there was no artifact
]]
local deleted = redis.call('DEL', KEYS[1])
if ARGV[1] ~= '' then
  redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return deleted
