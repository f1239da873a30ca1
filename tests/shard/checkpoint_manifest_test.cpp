// The checkpoint manifest parser (shard/src/checkpoint_manifest.cpp) on text:
// a valid v4 manifest round-trips, and unit lines whose sizes are out of
// range are refused naming the line, without signed overflow (found by
// fuzz_checkpoint_manifest: a shard of 5999999999999999999 elements made
// shard * group_size overflow; its input is in the fuzz corpus too). The
// whole save/load path is checkpoint_test.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "checkpoint_manifest.h"
#include "shard/hex.h"

namespace {

std::string manifest_with_unit(const std::string& unit_line) {
  return "greenshard-checkpoint 4\nworld_size 2\nshard_group_size 2\nstrategy FULL_SHARD\nstep 100\nextra 7b7d\n"
         "adam_state 1 100\nunits 1\n" +
         unit_line +
         "\nparam w 0 10 float32 1 10\nchunk_bytes 65536\nfiles 2\n"
         "file rank_0.bin 68 0000000012345678 rank_0.crc 00000000deadbeef\n"
         "file rank_1.bin 68 0000000087654321 rank_1.crc 0000000011111111\n";
}

std::string error_of(const std::string& text) {
  try {
    shard::parse_manifest(text, "ckpt/manifest.txt");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CheckpointManifest, AValidManifestParsesAndRoundTrips) {
  const std::string text = manifest_with_unit("unit <root> 10 10 5 1");
  const shard::Manifest m = shard::parse_manifest(text, "ckpt/manifest.txt");
  ASSERT_EQ(m.units.size(), 1u);
  EXPECT_EQ(m.units[0].shard, 5);
  EXPECT_EQ(m.units[0].padded, 10);
  EXPECT_EQ(m.files.size(), 2u);
  EXPECT_EQ(shard::manifest_text(m), text);
}

TEST(CheckpointManifest, UnitSizesOutOfRangeAreRefusedNamingTheLine) {
  const std::string over = std::to_string(shard::kMaxShardElements + 1);
  const std::string over_padded = std::to_string(2 * (shard::kMaxShardElements + 1));
  for (const std::string& unit : {
           std::string("unit <root> 10 10 5999999999999999999 1"),  // the fuzzer's: shard * group_size overflowed
           "unit <root> 10 " + over_padded + " " + over + " 1",        // consistent, but beyond the bound
           std::string("unit <root> -1 10 5 1"),                      // negative numel
           std::string("unit <root> 11 10 5 1"),                      // numel > padded
           std::string("unit <root> 10 10 -5 1"),                     // negative shard
       }) {
    const std::string err = error_of(manifest_with_unit(unit));
    EXPECT_NE(err.find("ckpt/manifest.txt"), std::string::npos) << unit << ": " << err;
    EXPECT_NE(err.find("bad unit line"), std::string::npos) << unit << ": " << err;
  }
}

// The hex codec of opaque checkpoint bytes (a manifest's extra, the
// worker's generator state): every byte value round-trips, and text that is
// not hex is refused rather than read as something else.
TEST(Hex, EveryByteRoundTripsAndNonHexIsRefused) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string h = shard::to_hex(all);
  EXPECT_EQ(h.substr(0, 6), "000102");
  EXPECT_EQ(h.substr(h.size() - 4), "feff");
  EXPECT_EQ(shard::from_hex(h), all);
  EXPECT_EQ(shard::from_hex("FEff"), "\xfe\xff");
  EXPECT_EQ(shard::from_hex(""), "");
  for (const char* bad : {"f", "zz", "+f", " f", "-1", "0x"}) {
    EXPECT_THROW(shard::from_hex(bad), std::invalid_argument) << "'" << bad << "'";
  }
}
