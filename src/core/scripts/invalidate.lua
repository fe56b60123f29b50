--[[
  invalidate (protocol v3): delete a result artifact so that the next invocation dispatches
  again, and tell every worker's local artifact cache to drop it.

  KEYS[1]  artifact of (scope, jobType)

  ARGV[1]  pub/sub channel of the namespace's cache invalidations, or '' for none

  Publishes KEYS[1] on ARGV[1] whether or not the artifact existed, so a cache can never keep
  serving a copy that Redis no longer has. A lock in flight is not touched: invalidation ends a
  finished result, not a running dispatch.

  PUBLISH comes before DEL: Redis does not undo a script's writes when a later command fails, so a
  user whose ACL denies PUBLISH (not in @write; on Redis 7 a new user has no channel either) gets
  the error with the artifact still in place, not an artifact deleted while the caches keep their
  copy. No other client runs between the two, so a cache that drops its copy on the message reads
  the key gone.

  Returns:
    1  the artifact existed and is deleted
    0  there was no artifact
]]
if ARGV[1] ~= '' then
  redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return redis.call('DEL', KEYS[1])
