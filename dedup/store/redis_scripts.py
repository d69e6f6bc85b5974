"""The Redis store's server-side steps (Lua, run atomically by Redis).

Each call touches keys of one hash slot only (one table shard: see
``redis_store``), so the same scripts run on one Redis and on a Redis
Cluster. Fingerprints travel and are stored as 8-byte big-endian strings,
compared with Redis's ``bit`` library on two exact 32-bit halves: nothing
passes through a Lua number above 2**32 (Lua numbers are doubles).
"""

# Shared by the scripts that scan or record: near(): is the 8-byte string at
# s[pos] within k bits of (ah, al)? scan(): add the fingerprints of s within k to
# found. dup(): a duplicate's verdict, "1" + a 2-byte count + its neighbours.
# record(): write a new fingerprint's record in table 0 and count it.
_LIB = """
local band, bxor = bit.band, bit.bxor
local function near(ah, al, s, pos, k)
  local bh, bl = struct.unpack('>I4I4', s, pos)
  local c = 0
  local x = bxor(ah, bh)
  while x ~= 0 do x = band(x, x - 1); c = c + 1; if c > k then return false end end
  x = bxor(al, bl)
  while x ~= 0 do x = band(x, x - 1); c = c + 1; if c > k then return false end end
  return true
end
local function scan(ah, al, s, k, found)
  for pos = 1, #s, 8 do
    if near(ah, al, s, pos, k) and #found < 65535 then found[#found + 1] = string.sub(s, pos, pos + 7) end
  end
end
local function dup(found)
  return '1' .. string.char(math.floor(#found / 256), #found % 256) .. table.concat(found)
end
local function record(bucket0, fp, seq, key)
  redis.call('HSET', bucket0 .. ':r', fp .. seq, key)
  redis.call('INCR', string.match(bucket0, '^{[^}]*}') .. ':n')
end
"""

#: Probe one bucket per fingerprint and reserve the fingerprint there.
#: KEYS[1]: the first bucket (declares the slot; every bucket of a call shares its hash tag)
#: ARGV: k, token, lease_ms, fingerprints (8 bytes each, concatenated), bucket names
#: (space-separated, one per fingerprint), and optionally the bucket lengths the
#: caller read and scanned itself (space-separated): only what follows is scanned here. A bucket's reservations are the hash
#: "<bucket>:p" (field: fingerprint, value: "token:expiry_ms").
#: Returns bytes, per fingerprint: "0" (reserved: nothing committed or reserved by
#: another process within k), "2" (another process holds a live reservation within
#: k: wait), or "1" + a 2-byte count + the committed fingerprints within k (8 bytes
#: each): a duplicate. Expired reservations (their process died) are removed on the way.
RESERVE = _LIB + """
local k, token, lease, fps = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local seen = {}
for n in string.gmatch(ARGV[6] or '', '%d+') do seen[#seen + 1] = tonumber(n) end
local out, i = {}, 1
for bucket in string.gmatch(ARGV[5], '%S+') do
  local fp = string.sub(fps, i, i + 7)
  local pend = bucket .. ':p'
  local ah, al = struct.unpack('>I4I4', fp)
  local verdict, found = 0, {}
  -- only what was committed since the caller read the bucket (it scanned the rest)
  scan(ah, al, redis.call('GETRANGE', bucket, seen[(i + 7) / 8] or 0, -1), k, found)
  i = i + 8
  if #found > 0 then
    verdict = 1
  else
    local p = redis.call('HGETALL', pend)
    for j = 1, #p, 2 do
      local v = p[j + 1]
      local sep = string.find(v, ':', 1, true)
      if string.sub(v, 1, sep - 1) ~= token then
        if tonumber(string.sub(v, sep + 1)) < now then
          redis.call('HDEL', pend, p[j])
        elseif near(ah, al, p[j], 1, k) then
          verdict = 2; break
        end
      end
    end
  end
  if verdict == 0 then redis.call('HSET', pend, fp, token .. ':' .. (now + lease)) end
  out[#out + 1] = verdict == 1 and dup(found) or tostring(verdict)
end
return table.concat(out)
"""

#: Commit reserved (or unconditionally added) fingerprints into one table:
#: append each to its bucket and drop this process's reservation. In table 0
#: also write the record (field: fingerprint + 8-byte sequence number, value:
#: its key) in "<bucket>:r" and count it in "<tag>:n", so a fingerprint is never
#: visible in any table before its record.
#: KEYS[1]: the first bucket. ARGV: token, repair ('1': skip a fingerprint already
#: in its bucket), fingerprints (concatenated), bucket names (space-separated),
#: then in table 0 only: sequence numbers (8 bytes each, concatenated), and a key
#: per fingerprint.
#: Returns how many were appended.
COMMIT = _LIB + """
local token, repair, fps = ARGV[1], ARGV[2] == '1', ARGV[3]
local table0 = #ARGV > 4
local function has(s, fp)
  local i = 1
  while true do
    i = string.find(s, fp, i, true)
    if not i then return false end
    if (i - 1) % 8 == 0 then return true end
    i = i + 1
  end
end
local n, i = 0, 0
for bucket in string.gmatch(ARGV[4], '%S+') do
  local fp = string.sub(fps, i * 8 + 1, i * 8 + 8)
  local skip = false
  if repair then
    local s = redis.call('GET', bucket)
    skip = s ~= false and has(s, fp)
  end
  if not skip then
    redis.call('APPEND', bucket, fp)
    if table0 then record(bucket, fp, string.sub(ARGV[5], i * 8 + 1, i * 8 + 8), ARGV[6 + i]) end
    n = n + 1
  end
  -- (no other process holds a live reservation of this very fingerprint here: it
  -- would have waited for ours; so the field is this process's, or expired)
  redis.call('HDEL', bucket .. ':p', fp)
  i = i + 1
end
return n
"""

#: One Redis (not a cluster): check and commit each fingerprint in one atomic step
#: over all its tables, no reservations needed. The caller read the buckets and
#: found no committed neighbour; this scans only what was committed since.
#: KEYS[1]: any bucket. ARGV: k, T, fingerprints (concatenated), their buckets
#: (space-separated, T per fingerprint in table order), the bucket lengths read
#: (space-separated, likewise), sequence numbers (8 bytes each, concatenated),
#: then a key per fingerprint.
#: Returns bytes, per fingerprint: "0" (committed in every table, with its record)
#: or "1" + a 2-byte count + the fingerprints within k committed since the read.
CHECK_AND_COMMIT = _LIB + """
local k, T, fps, seqs = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[6]
local names, seen = {}, {}
for n in string.gmatch(ARGV[4], '%S+') do names[#names + 1] = n end
for n in string.gmatch(ARGV[5], '%d+') do seen[#seen + 1] = tonumber(n) end
local out = {}
for i = 0, #fps / 8 - 1 do
  local fp = string.sub(fps, i * 8 + 1, i * 8 + 8)
  local ah, al = struct.unpack('>I4I4', fp)
  local found = {}
  for t = 1, T do scan(ah, al, redis.call('GETRANGE', names[i * T + t], seen[i * T + t], -1), k, found) end
  if #found > 0 then
    out[#out + 1] = dup(found)
  else
    for t = 1, T do redis.call('APPEND', names[i * T + t], fp) end
    record(names[i * T + 1], fp, string.sub(seqs, i * 8 + 1, i * 8 + 8), ARGV[7 + i])
    out[#out + 1] = '0'
  end
end
return table.concat(out)
"""

#: Drop this process's reservations (a fingerprint found to be a duplicate in a
#: later table gives back the ones it took). KEYS[1]: the first bucket;
#: ARGV: token, fingerprints (concatenated), bucket names (space-separated).
RELEASE = """
local token, fps, i = ARGV[1], ARGV[2], 1
for bucket in string.gmatch(ARGV[3], '%S+') do
  local pend, fp = bucket .. ':p', string.sub(fps, i, i + 7)
  i = i + 8
  local v = redis.call('HGET', pend, fp)
  if v and string.sub(v, 1, #token + 1) == token .. ':' then redis.call('HDEL', pend, fp) end
end
return 0
"""

#: Read buckets. KEYS[1]: the first (declares the slot). ARGV[1]: their names
#: (space-separated). Returns bytes: every bucket's length (4 bytes each), then
#: their contents, concatenated (so the caller splits them with numpy).
READ = """
local sizes, contents = {}, {}
for name in string.gmatch(ARGV[1], '%S+') do
  local s = redis.call('GET', name) or ''
  sizes[#sizes + 1] = struct.pack('>I4', #s)
  contents[#contents + 1] = s
end
return table.concat(sizes) .. table.concat(contents)
"""

#: Read the records of stored fingerprints. KEYS[1]: the first records hash (declares
#: the slot). ARGV: fingerprints (concatenated), their records hashes (space-separated).
#: Returns bytes, per fingerprint: a 4-byte count, then per record its 8-byte
#: sequence number, a 4-byte key length and the key.
RECORDS = """
local fps, out, i = ARGV[1], {}, 1
for name in string.gmatch(ARGV[2], '%S+') do
  local fp = string.sub(fps, i, i + 7)
  i = i + 8
  local recs, n = redis.call('HGETALL', name), 0
  local mine = {}
  for j = 1, #recs, 2 do
    local field = recs[j]
    if string.sub(field, 1, 8) == fp then
      local key = recs[j + 1]
      mine[#mine + 1] = string.sub(field, 9, 16) .. struct.pack('>I4', #key) .. key
      n = n + 1
    end
  end
  out[#out + 1] = struct.pack('>I4', n)
  out[#out + 1] = table.concat(mine)
end
return table.concat(out)
"""

#: Create the store's metadata unless another process did first. KEYS: meta;
#: ARGV: name_1, value_1, ... Returns 1 when this call created it.
INIT_META = """
if redis.call('HEXISTS', KEYS[1], 'format') == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""
