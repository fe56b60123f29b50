--[[
  force-release (protocol v3): `fire-once release --force`. Delete the lock only if it still holds
  exactly the value the CLI showed a moment before, and wake the scope's waiters as a failure
  release does. A lock taken over (or renewed by another holder) in between is left alone.

  KEYS[1]  lock of (scope, step): '<prefix>:v3:{<ns>/<scope>}:l:<step>'

  ARGV[1]  the lock's value as read
  ARGV[2]  pub/sub channel to wake waiters on, published just before the delete (see below)

  Parked waiters are left registered: their own workers see the lock gone and fail them, so that
  they retry and one of them dispatches.

  PUBLISH comes before DEL: Redis does not undo a script's writes when a later command fails, so a
  user whose ACL denies PUBLISH (not in @write; on Redis 7 a new user has no channel either) gets
  the error with the lock still in place, not a lock deleted and its waiters never woken. No other
  client runs between the two, so waiters see the lock gone when the message reaches them.

  Returns:
    1  deleted
    0  refused: the lock is gone, or holds another value now
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PUBLISH', ARGV[2], 'release')
redis.call('DEL', KEYS[1])
return 1
