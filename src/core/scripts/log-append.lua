--[[
  log-append (protocol v3): append a batch of dispatch-log entries to one namespace's stream, in
  one round trip, so a worker sends one command per batch instead of one per decision.

  KEYS[1]  the dispatch log stream: '<prefix>:v3:<ns>:log'

  ARGV[1]  approximate cap on the stream's length (positive integer, XADD MAXLEN ~)
  ARGV[2..] the entries, one after another: a field count n, then n field/value pairs
            (field names: EVENT_FIELDS in dispatch-log.ts)

  Each entry gets its own stream ID ('*'), so every decision stays one entry for the CLI.

  Returns: the number of entries appended.
]]
-- The fields go to XADD straight from ARGV with unpack's range: copying them into a table of their
-- own first cost each entry about 1.8 us more on Redis 7.0 (bench/RESULTS.md, the dispatch log).
local i = 2
local appended = 0
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, i + 1, i + n))
  appended = appended + 1
  i = i + n + 1
end
return appended
