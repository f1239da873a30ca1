#include "crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace shard {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli
constexpr size_t kThreeStreamMin = 4096;  // below: one stream (the combine costs ~1 us)

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t crc32c_table(uint32_t crc, const unsigned char* p, size_t n) {
  static const auto table = make_table();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// Three streams at once: the crc32 instruction's latency is three times its
// throughput, so one stream leaves two thirds of it idle. Takes and returns
// the plain (non-inverted) CRC, like crc32c().
__attribute__((target("sse4.2"))) uint32_t crc32c_hw3(uint32_t crc, const unsigned char* p, size_t n) {
  const size_t block = n / 3 / 8 * 8;
  uint64_t a = static_cast<uint32_t>(~crc), b = 0xFFFFFFFFu, c = 0xFFFFFFFFu;
  const unsigned char *pa = p, *pb = p + block, *pc = p + 2 * block;
  for (size_t i = 0; i < block; i += 8) {
    uint64_t va, vb, vc;
    std::memcpy(&va, pa + i, 8);
    std::memcpy(&vb, pb + i, 8);
    std::memcpy(&vc, pc + i, 8);
    a = _mm_crc32_u64(a, va);
    b = _mm_crc32_u64(b, vb);
    c = _mm_crc32_u64(c, vc);
  }
  uint32_t r = crc32c_concat(~static_cast<uint32_t>(a), ~static_cast<uint32_t>(b), block);
  r = crc32c_concat(r, ~static_cast<uint32_t>(c), block);
  return ~crc32c_hw(~r, p + 3 * block, n - 3 * block);
}
#endif

// a * b modulo the polynomial (both reflected: bit 31 is x^0).
uint32_t gf2_multiply(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, product = 0;
  for (;;) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

}  // namespace

uint32_t crc32c_concat(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  // crc(a + b) = crc_a * x^(8 len_b) + crc_b (the pre/post inversions cancel).
  uint32_t power = 1u << 30;   // x^1, squared each round: x^(2^k)
  uint32_t shift = 1u << 31;   // x^0
  for (uint64_t n = static_cast<uint64_t>(len_b) * 8; n > 0; n >>= 1) {
    if (n & 1) shift = gf2_multiply(power, shift);
    power = gf2_multiply(power, power);
  }
  return gf2_multiply(shift, crc_a) ^ crc_b;
}

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw && n >= kThreeStreamMin) return crc32c_hw3(~crc, p, n);
  crc = hw ? crc32c_hw(crc, p, n) : crc32c_table(crc, p, n);
#else
  crc = crc32c_table(crc, p, n);
#endif
  return ~crc;
}

}  // namespace shard
