"""The Redis store's server-side steps (Lua, run atomically by Redis).

Each call touches keys of one hash slot only (one table shard: see
``keys``), so the same scripts run on one Redis and on a Redis
Cluster. Fingerprints travel and are stored as 8-byte big-endian strings,
compared with Redis's ``bit`` library on two exact 32-bit halves: nothing
passes through a Lua number above 2**32 (Lua numbers are doubles).
"""

# Shared by the scripts that scan or record: near(): is the 8-byte string at
# s[pos] within k bits of (ah, al)? scan(): add the fingerprints of s within k to
# found. dup(): a duplicate's verdict, "1" + a 2-byte count + its neighbours.
# record(): write a new fingerprint's record in table 0 and count it in counts
# (written by add_counts once per call: one INCRBY per shard, not one INCR per record).
# A record hash "<bucket>:r" has a field per fingerprint (8 bytes), its value
# that fingerprint's records, each an 8-byte sequence number, a 4-byte key length
# and the key: one HGET reads a fingerprint's records.
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
local function record(bucket0, fp, seq, key, counts)
  local recs, entry = bucket0 .. ':r', seq .. struct.pack('>I4', #key) .. key
  if redis.call('HSETNX', recs, fp, entry) == 0 then  -- (the same fingerprint stored again: rare)
    redis.call('HSET', recs, fp, redis.call('HGET', recs, fp) .. entry)
  end
  local n = string.match(bucket0, '^{[^}]*}') .. ':n'
  counts[n] = (counts[n] or 0) + 1
end
local function add_counts(counts)
  for n, c in pairs(counts) do redis.call('INCRBY', n, c) end
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
#: KEYS[1]: the first bucket. ARGV: token, mode ('0': append; '1', repair: skip a
#: fingerprint already in its bucket; '2', once: skip in table 0 a record written
#: already, this very sequence number and key, and in the other tables a fingerprint
#: already in its bucket: a reserved commit that redis-py sent again after losing
#: its answer writes once), fingerprints (concatenated), bucket names (space-separated),
#: then in table 0 only: sequence numbers (8 bytes each, concatenated), and a key
#: per fingerprint.
#: Returns how many were appended.
COMMIT = _LIB + """
local token, mode, fps = ARGV[1], ARGV[2], ARGV[3]
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
local n, i, counts = 0, 0, {}
for bucket in string.gmatch(ARGV[4], '%S+') do
  local fp = string.sub(fps, i * 8 + 1, i * 8 + 8)
  local skip = false
  if mode == '1' or (mode == '2' and not table0) then
    local s = redis.call('GET', bucket)
    skip = s ~= false and has(s, fp)
  elseif mode == '2' then
    local key, old = ARGV[6 + i], redis.call('HGET', bucket .. ':r', fp)
    skip = old ~= false and string.find(old, string.sub(ARGV[5], i * 8 + 1, i * 8 + 8) ..
      struct.pack('>I4', #key) .. key, 1, true) ~= nil
  end
  if not skip then
    redis.call('APPEND', bucket, fp)
    if table0 then record(bucket, fp, string.sub(ARGV[5], i * 8 + 1, i * 8 + 8), ARGV[6 + i], counts) end
    n = n + 1
  end
  -- (no other process holds a live reservation of this very fingerprint here: it
  -- would have waited for ours; so the field is this process's, or expired)
  redis.call('HDEL', bucket .. ':p', fp)
  i = i + 1
end
add_counts(counts)
return n
"""

#: One Redis (not a cluster): check and commit each fingerprint in one atomic step
#: over all its tables, no reservations needed. The caller read the buckets and
#: found no committed neighbour; this appends the fingerprint to its T buckets and
#: scans only what another process appended since the read (APPEND returns the new
#: length, so in the usual case, nothing appended since, there is nothing to read).
#: A neighbour found there undoes the appends (the fingerprint is each bucket's
#: last 8 bytes: nothing else ran in between).
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
local out, counts = {}, {}
for i = 0, #fps / 8 - 1 do
  local fp = string.sub(fps, i * 8 + 1, i * 8 + 8)
  local ah, al = struct.unpack('>I4I4', fp)
  local found, lens = {}, {}
  for t = 1, T do
    local name, from = names[i * T + t], seen[i * T + t]
    local len = redis.call('APPEND', name, fp)
    lens[t] = len
    if len > from + 8 then scan(ah, al, redis.call('GETRANGE', name, from, len - 9), k, found) end
  end
  if #found > 0 then
    for t = 1, T do
      local name = names[i * T + t]
      if lens[t] == 8 then redis.call('DEL', name) else redis.call('SET', name, redis.call('GETRANGE', name, 0, -9)) end
    end
    out[#out + 1] = dup(found)
  else
    record(names[i * T + 1], fp, string.sub(seqs, i * 8 + 1, i * 8 + 8), ARGV[7 + i], counts)
    out[#out + 1] = '0'
  end
end
add_counts(counts)
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

#: Read the records of stored fingerprints. KEYS[1]: the first records hash
#: (declares the slot). ARGV: fingerprints (concatenated), their records hashes
#: (space-separated). Returns bytes, per fingerprint: a 4-byte length, then its
#: field's value (its records, as ``record`` writes them; length 0: none).
#: (One call per chunk, not one HGET each: the client's cost per command is what counts.)
RECORDS = """
local fps, out, i = ARGV[1], {}, 1
for name in string.gmatch(ARGV[2], '%S+') do
  local v = redis.call('HGET', name, string.sub(fps, i, i + 7)) or ''
  i = i + 8
  out[#out + 1] = struct.pack('>I4', #v) .. v
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
