-- Included by lua/acquire.lua and lua/refund.lua where they first need it
-- (`--#include floordiv.lua`, expanded by src/stores/lua-script.ts): only
-- huge buckets use it, so the common path never builds the closure.
-- Expects EXACT (2^53) in scope.
local B, BB = 16777216, 281474976710656
-- Whole 0 <= x < 2^53 as three 24-bit limbs, low first.
local function limbs(x)
  local x2 = math.floor(x / BB)
  local x1 = math.floor((x - x2 * BB) / B)
  return x - x2 * BB - x1 * B, x1, x2
end
-- The rounding error of p = x * y, for whole x, y below 2^53: x * y = p + error exactly (Dekker).
local function productError(x, y, p)
  local t = 134217729 * x
  local xh = t - (t - x)
  local xl = x - xh
  t = 134217729 * y
  local yh = t - (t - y)
  local yl = y - yh
  return ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
end
-- floor((a * b + c) / d), exactly, for whole 0 <= a < 2^52, 0 <= c < b < 2^52,
-- 1 <= d < 2^50 and a result below 2^53:
-- a * b = p + e and p + c = s + f exactly (Dekker's product, Fast2Sum), and
-- N - q * d is then exact near the answer.
floordiv = function(a, b, c, d)
  local p = a * b
  if p + c < EXACT then return math.floor((p + c) / d) end
  if b >= 4503599627370496 or d >= 1125899906842624 then
    -- Beyond those: long division over the bits of a * b + c, kept as 24-bit
    -- limbs (every product below 2^48); the remainder stays below d, and
    -- 2 * rem + bit is compared with d as rem >= d - rem - bit. Every step exact.
    local a0, a1, a2 = limbs(a)
    local b0, b1, b2 = limbs(b)
    local c0, c1, c2 = limbs(c)
    local l = {a0 * b0 + c0, a0 * b1 + a1 * b0 + c1, a0 * b2 + a1 * b1 + a2 * b0 + c2, a1 * b2 + a2 * b1, a2 * b2, 0}
    for i = 1, 5 do
      local carry = math.floor(l[i] / B)
      l[i], l[i + 1] = l[i] - carry * B, l[i + 1] + carry
    end
    local top = 6
    while top > 1 and l[top] == 0 do top = top - 1 end
    local rem, quo = 0, 0
    for i = top, 1, -1 do
      local limb, bit = l[i], 8388608
      while bit >= 1 do
        local one = 0
        if limb >= bit then limb, one = limb - bit, 1 end
        local gap = d - rem - one
        if rem >= gap then rem, quo = rem - gap, 2 * quo + 1 else rem, quo = 2 * rem + one, 2 * quo end
        bit = bit / 2
      end
    end
    return quo
  end
  local e = productError(a, b, p)
  local sum = p + c
  local f = c - (sum - p)
  local q = math.floor(sum / d)
  local qp = q * d
  local qe = productError(q, d, qp)
  local R = ((sum - qp) - qe) + (f + e)
  return q + math.floor(R / d)
end
