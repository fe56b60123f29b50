--[[
  find-latest: walk the dispatch log backwards from ARGV[1] for at most ARGV[2] entries and return
  the newest entry whose fields match every given (name, value) pair. Read-only; Redis is busy for
  at most ARGV[2] entries per call, and the caller goes on from the returned cursor.

  KEYS[1]  the dispatch log stream of one namespace, '<prefix>:v3:<ns>:log'

  ARGV[1]  ID to start from, going backwards: '<id>' (inclusive), or '+' for the newest entry
           ('(<id>', exclusive, needs Redis 6.2: the CLI passes the ID just before instead)
  ARGV[2]  entries to look at in this call
  ARGV[3..] pairs of field name and value that must all match (a missing field matches '')

  Returns:
    {1, id, fields}  the newest matching entry: its ID and its flat field list
    {0, id}          none in this call; the last ID looked at, to go on from just before it
    {0, ''}          none, and the start of the log was reached
]]
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', tonumber(ARGV[2]))
for i = 1, #entries do
  local fields = entries[i][2]
  local values = {}
  for f = 1, #fields - 1, 2 do
    values[fields[f]] = fields[f + 1]
  end
  local match = true
  for a = 3, #ARGV - 1, 2 do
    if (values[ARGV[a]] or '') ~= ARGV[a + 1] then
      match = false
      break
    end
  end
  if match then return { 1, entries[i][1], fields } end
end
if #entries < tonumber(ARGV[2]) then return { 0, '' } end
return { 0, entries[#entries][1] }
