"""The Lua scripts of a save, a delete and the timer claims: Redis runs each one whole, so no worker ever sees half of
one."""

from __future__ import annotations

_ARCHIVE_BATCH = 1000  # RPUSH arguments per call, well under Lua's stack limit
_UNINDEX_BATCH = 100  # expired entries a save forgets: more than one save adds, so the backlog shrinks

# KEYS: record, archive, pair index, global index, turns, replies, reply ids, user index, expiry index,
#       the conversation's timers, the timer index, the timer claims
# ARGV: expected ('' = create), new version, record, updated_at, fsm_id, state, status, ttl_ms,
#       pair member, global member, save id, number of archived messages, of turn records, of replies,
#       turn records kept, message ids kept, user member, when the record expires ('' = never), now, key prefix,
#       number of armed timers, then the archived messages, (index, turn record) pairs in index order, (message id,
#       reply) pairs, oldest first, and (timer id, due time) pairs.
# Each save() call sends a random save id. When redis-py re-sends the script
# because the connection dropped after it ran, the script finds its own save id
# at the new version and reports success without applying twice; any other
# save at that version, even an identical one, is a conflict.
# A turn record at or below ``last_turn`` is already logged and a message id already in ``replies``
# keeps its first reply, so an instance loaded whole and saved again logs nothing twice.
# Before indexing, a save forgets up to UNINDEX_BATCH index entries whose record's TTL has passed (the expiry
# index holds every conversation with a TTL, scored by when its record expires): the indexes, ``%all`` included,
# hold no more than the conversations alive, plus those expired since the last save. The entries are other
# conversations' (keys built here from the member, so the store needs a single Redis, not a cluster), and so are
# their armed timers, dropped from the timer index with them.
# The timer index: ``P:%timers`` holds "U:R:C:T" (the conversation's global member and the timer id) scored by due
# time; ``P:%timer_claims`` maps such a member to the claim holding it ("claimed_until token"); the conversation's own
# hash ``P:U:R:C:timers`` (timer id → due time, as sent) says which members are its own, so a save, a delete or an
# expiry finds them without a scan. It has no TTL: whatever removes the conversation removes it.
_UNARM = """
local function unarm(member, timers_key, keep)
  local old = redis.call('HGETALL', timers_key)
  for k = 1, #old, 2 do
    if keep == nil or keep[old[k]] ~= old[k + 1] then
      redis.call('ZREM', KEYS[11], member .. ':' .. old[k])
      redis.call('HDEL', KEYS[12], member .. ':' .. old[k])
    end
  end
  redis.call('DEL', timers_key)
end
"""
_UNINDEX = (
    _UNARM
    + """
local function unindex(member)
  local u, r, c = string.match(member, '^([^:]*):([^:]*):(.*)$')
  if u then
    redis.call('ZREM', ARGV[20] .. ':' .. u .. ':' .. r, c)
    redis.call('ZREM', ARGV[20] .. ':' .. u .. ':%rooms', r .. ':' .. c)
  end
  redis.call('ZREM', KEYS[4], member)
  redis.call('ZREM', KEYS[9], member)
  unarm(member, ARGV[20] .. ':' .. member .. ':timers')
end
"""
)

_SAVE = (  # a placeholder, not str.format: Lua's braces would all need doubling
    _UNINDEX
    + """
local cur = redis.call('HGET', KEYS[1], 'version')
if cur == ARGV[2] and redis.call('HGET', KEYS[1], 'save_id') == ARGV[11] then
  return {1, cur}
end
if ARGV[1] == '' then
  if cur then return {0, cur} end
elseif cur ~= ARGV[1] then
  return {0, cur or ''}
end
for k, kind in pairs({[2] = 'list', [3] = 'zset', [4] = 'zset', [5] = 'list', [6] = 'hash', [7] = 'list',
                      [8] = 'zset', [9] = 'zset', [10] = 'hash', [11] = 'zset', [12] = 'hash'}) do
  local found = redis.call('TYPE', KEYS[k])['ok']
  if found ~= 'none' and found ~= kind then  -- refused before the first write: a script is not rolled back
    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' is a ' .. found .. ', not a ' .. kind)
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'record', ARGV[3], 'updated_at', ARGV[4],
           'fsm_id', ARGV[5], 'state', ARGV[6], 'status', ARGV[7], 'save_id', ARGV[11])
if ARGV[1] == '' then redis.call('DEL', KEYS[2], KEYS[5], KEYS[6], KEYS[7]) end
local i = 22
local stop = 21 + tonumber(ARGV[12])
while i <= stop do
  local j = math.min(i + ARCHIVE_BATCH - 1, stop)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local turns = tonumber(ARGV[13])
if turns > 0 then
  local last = tonumber(redis.call('HGET', KEYS[1], 'last_turn') or '')
  local appended = false
  for k = 0, turns - 1 do
    local index = tonumber(ARGV[i + 2 * k])
    if last == nil or index > last then
      redis.call('RPUSH', KEYS[5], ARGV[i + 2 * k + 1])
      last = index
      appended = true
    end
  end
  if appended then
    redis.call('HSET', KEYS[1], 'last_turn', ARGV[i + 2 * (turns - 1)])
    redis.call('LTRIM', KEYS[5], -tonumber(ARGV[15]), -1)
  end
  i = i + 2 * turns
end
local replies = tonumber(ARGV[14])
if replies > 0 then
  local added = false
  for k = 0, replies - 1 do
    if redis.call('HSETNX', KEYS[6], ARGV[i + 2 * k], ARGV[i + 2 * k + 1]) == 1 then
      redis.call('RPUSH', KEYS[7], ARGV[i + 2 * k])
      added = true
    end
  end
  if added then
    local extra = redis.call('LLEN', KEYS[7]) - tonumber(ARGV[16])
    if extra > 0 then
      redis.call('HDEL', KEYS[6], unpack(redis.call('LPOP', KEYS[7], extra)))
    end
  end
  i = i + 2 * replies
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', '(' .. ARGV[19], 'LIMIT', 0, UNINDEX_BATCH)) do
  unindex(member)
end
local armed = tonumber(ARGV[21])
if armed > 0 or redis.call('EXISTS', KEYS[10]) == 1 then
  local keep = {}
  for k = 0, armed - 1 do keep[ARGV[i + 2 * k]] = ARGV[i + 2 * k + 1] end
  unarm(ARGV[10], KEYS[10], keep)  -- an entry kept with its due time keeps its claim; a changed one starts unclaimed
  for k = 0, armed - 1 do
    redis.call('HSET', KEYS[10], ARGV[i + 2 * k], ARGV[i + 2 * k + 1])
    redis.call('ZADD', KEYS[11], ARGV[i + 2 * k + 1], ARGV[10] .. ':' .. ARGV[i + 2 * k])
  end
end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[9])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[10])
redis.call('ZADD', KEYS[8], ARGV[4], ARGV[17])
if ARGV[18] == '' then redis.call('ZREM', KEYS[9], ARGV[10]) else redis.call('ZADD', KEYS[9], ARGV[18], ARGV[10]) end
local ttl = tonumber(ARGV[8])
for _, k in ipairs({1, 2, 3, 5, 6, 7, 8}) do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[k], ttl) else redis.call('PERSIST', KEYS[k]) end
end
return {2, ARGV[2]}
""".replace("ARCHIVE_BATCH", str(_ARCHIVE_BATCH)).replace("UNINDEX_BATCH", str(_UNINDEX_BATCH))
)

# KEYS: as the save's
# ARGV: pair member, global member, cutoff ('' = always), user member
_DELETE = (
    _UNARM
    + """
local existed = redis.call('EXISTS', KEYS[1])
if existed == 1 and ARGV[3] ~= '' then
  local updated = tonumber(redis.call('HGET', KEYS[1], 'updated_at'))
  if updated and updated >= tonumber(ARGV[3]) then return 0 end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5], KEYS[6], KEYS[7])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[8], ARGV[4])
redis.call('ZREM', KEYS[9], ARGV[2])
unarm(ARGV[2], KEYS[10])
return existed
"""
)

# KEYS: the timer index, the timer claims
# ARGV: now, limit, claimed until, token
# Due members are read a page at a time, earliest first; one a live claim holds is passed over (its claimer may have
# died: the lease says when it is free again). Returns member, due time, member, due time, ...
_CLAIM = """
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, offset, page = {}, 0, math.max(limit, 100)
while #out < 2 * limit do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', offset, page)
  if #due == 0 then break end
  for k = 1, #due, 2 do
    local claim = redis.call('HGET', KEYS[2], due[k])
    if not claim or tonumber(string.match(claim, '^%S+')) <= now then
      redis.call('HSET', KEYS[2], due[k], ARGV[3] .. ' ' .. ARGV[4])
      out[#out + 1] = due[k]
      out[#out + 1] = due[k + 1]
      if #out >= 2 * limit then break end
    end
  end
  offset = offset + page
end
return out
"""

# KEYS: the timer index, the timer claims, the conversation's timers
# ARGV: member, token, timer id
_RELEASE = """
local claim = redis.call('HGET', KEYS[2], ARGV[1])
if claim and string.match(claim, '^%S+ (.*)$') == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[3])
  return 1
end
return 0
"""

SCRIPTS = {"save": _SAVE, "delete": _DELETE, "claim": _CLAIM, "release": _RELEASE}
"""Every script by the name a ``_Script`` call gives."""
