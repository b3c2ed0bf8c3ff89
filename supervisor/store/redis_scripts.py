"""The Lua scripts a Redis store runs to change several keys in one atomic step: appending
messages and events, the lease queue, holders letting go. Key names are redis_keys.py's.
"""

from __future__ import annotations

# KEYS: id counter, the agent's message zset[, ticket key]. ARGV: message JSON without its id
# (an object with at least one member), agent uuid. The id is spliced in as the first member.
APPEND_MESSAGE = """
local id = redis.call('INCR', KEYS[1])
local text = string.format('%d', id)
redis.call('ZADD', KEYS[2], id, '{"id":' .. text .. ',' .. string.sub(ARGV[1], 2))
if #KEYS == 3 then redis.call('SET', KEYS[3], ARGV[2] .. ' ' .. text) end
return id
"""
# KEYS: the event stream, the event id counter. ARGV: each event's JSON without its id.
# Returns the last id; the events hold consecutive ids, as the script runs atomically.
APPEND_EVENTS = """
local id = 0
for _, body in ipairs(ARGV) do
  id = redis.call('INCR', KEYS[2])
  redis.call('XADD', KEYS[1], string.format('%d-0', id), 'e', body)
end
return id
"""
# head(): the oldest live ticket of the queue KEYS[1], dropping dead tickets from its front.
_QUEUE_HEAD = """
local function head()
  while true do
    local first = redis.call('ZRANGE', KEYS[1], 0, 0)
    if #first == 0 then return false end
    if redis.call('EXISTS', ARGV[1] .. first[1]) == 1 then return tonumber(first[1]) end
    redis.call('ZREM', KEYS[1], first[1])
  end
end
"""
# KEYS: the session queue, the ticket counter. ARGV: ticket key prefix, TTL in ms.
# Returns the new ticket and the queue's head after it was added.
LEASE_TAKE = (
    _QUEUE_HEAD
    + """
local ticket = redis.call('INCR', KEYS[2])
redis.call('SET', ARGV[1] .. ticket, '1', 'PX', ARGV[2])
redis.call('ZADD', KEYS[1], ticket, ticket)
return {ticket, head()}
"""
)
# KEYS: the session queue. ARGV: ticket key prefix.
LEASE_HEAD = _QUEUE_HEAD + "return head()"
# let_go(holder): drop a holder: the trees it holds (those no other holder took since), its
# set of them, its key, its place among the holders. KEYS: the holds hash, the holders set.
# ARGV: holder key prefix (the holder's key is prefix .. id, its trees' set prefix .. id ..
# ':trees').
_LET_GO = """
local function let_go(holder)
  local trees = ARGV[1] .. holder .. ':trees'
  for _, root in ipairs(redis.call('SMEMBERS', trees)) do
    if redis.call('HGET', KEYS[1], root) == holder then redis.call('HDEL', KEYS[1], root) end
  end
  redis.call('DEL', trees, ARGV[1] .. holder)
  redis.call('SREM', KEYS[2], holder)
end
"""
# The live holders (their key has not expired); those that expired are let go of here.
LIVE_HOLDERS = (
    _LET_GO
    + """
local live = {}
for _, holder in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[1] .. holder) == 1 then table.insert(live, holder)
  else let_go(holder) end
end
return live
"""
)
# ARGV[2]: the holder to drop.
DROP_HOLDER = _LET_GO + "let_go(ARGV[2])"
