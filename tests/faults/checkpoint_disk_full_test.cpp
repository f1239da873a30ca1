// Issue 34, "Disk full": sharded checkpoint saves on a real full disk (a
// small tmpfs in a private mount namespace, private_tmpfs.h), with two real
// rank processes talking Gloo on loopback. Inside the namespace the test
// binary starts the ranks (they share the tmpfs); each rank:
//   1. saves step 1 (room enough);
//   2. rank 0 fills the disk with a filler file;
//   3. saves step 2: fails on every rank, naming the step and ENOSPC; no
//      DONE for step 2, its partial files are gone (the space comes back
//      with the filler), and step 1 is still the latest and loads;
//   4. rank 0 removes the filler; saves step 3: done, latest, loads.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <iostream>

#include "common/spawn.h"
#include "faults/private_tmpfs.h"
#include "shard/checkpoint.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"

namespace fs = std::filesystem;

namespace {

// One rank's part (GS_FAULT_RANK set): prints "FAIL: ..." and returns 1 at
// the first unexpected outcome, 0 when everything went as it should.
int rank_main() {
  const std::string mnt = faults::tmpfs_dir();
  const std::string root = mnt + "/ckpt";
  int rank = -1;
  auto fail = [&](const std::string& why) {
    std::cout << "FAIL (rank " << rank << "): " << why << std::endl;
    return 1;
  };
  try {
    const auto info = shard::rendezvous_info_from_env();
    rank = info.rank;
    auto rdzv = shard::Rendezvous::connect(info);
    auto barrier = [&] { rdzv->world()->barrier()->wait(); };
    torch::manual_seed(7);
    auto m = std::make_shared<torch::nn::Module>();
    // 66k parameters: ~0.4 MiB per rank file (its shard, and two zero parts
    // where Adam's state would be), ~0.8 MiB per step.
    m->register_module("a", torch::nn::Linear(128, 256));
    m->register_module("b", torch::nn::Linear(256, 128));
    shard::FullyShardedModel fsdp(m, rdzv, {});
    const std::string step1 = root + "/step_00000001", step2 = root + "/step_00000002",
                      step3 = root + "/step_00000003";

    // 1. Room enough.
    shard::save_checkpoint(fsdp, nullptr, root, 1, "one");
    if (shard::latest_checkpoint(root) != step1) return fail("step 1 is not the latest after its save");
    barrier();

    // 2. The disk fills up.
    if (rank == 0) std::cout << "filler: " << faults::fill_disk(mnt + "/filler") << " bytes" << std::endl;
    barrier();

    // 3. The save fails on every rank, naming the step and the full disk.
    std::string error;
    try {
      shard::save_checkpoint(fsdp, nullptr, root, 2, "two");
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::cout << "save of step 2: " << (error.empty() ? "succeeded" : error) << std::endl;
    if (error.empty()) return fail("the save of step 2 succeeded on a full disk");
    if (error.find(step2) == std::string::npos) return fail("the error does not name " + step2 + ": " + error);
    if (error.find("No space left on device") == std::string::npos) return fail("the error does not say ENOSPC: " + error);
    barrier();  // (rank 0 removed step 2's partial files before its save returned)
    if (fs::exists(step2 + "/DONE")) return fail("step 2 has a DONE marker");
    if (fs::exists(step2)) return fail("step 2's partial files are left on the full disk");
    if (shard::latest_checkpoint(root) != step1)
      return fail("latest is " + shard::latest_checkpoint(root) + ", not " + step1);
    auto loaded = shard::load_checkpoint(fsdp, nullptr, shard::latest_checkpoint(root));
    if (loaded.step != 1 || loaded.extra != "one") return fail("step 1 did not load back");
    barrier();

    // 4. Space again: the next save is done.
    if (rank == 0) fs::remove(mnt + "/filler");
    barrier();
    shard::save_checkpoint(fsdp, nullptr, root, 3, "three");
    if (shard::latest_checkpoint(root) != step3) return fail("step 3 is not the latest after its save");
    auto again = shard::load_checkpoint(fsdp, nullptr, step3);
    if (again.step != 3 || again.extra != "three") return fail("step 3 did not load back");
    barrier();
    std::cout << "RANK_OK" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
}

void checkpoint_scenario() {
  ASSERT_FALSE(faults::tmpfs_dir().empty());
  gstest::SpawnOptions so;
  so.world_size = 2;
  so.timeout = std::chrono::seconds(240);
  so.env = {{"GS_FAULT_RANK", "1"}, {"OMP_NUM_THREADS", "1"}};
  const auto ranks = gstest::run_ranks({gstest::self_exe()}, so);
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& r : ranks) {
    std::cout << "--- rank " << r.rank << "\n" << r.output << std::endl;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank;
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("RANK_OK"), std::string::npos) << r.output;
  }
}

TEST(DiskFull, CheckpointSaveFailsOnEveryRankKeepsThePreviousAndSavesAgainWithSpace) {
  // 4 MiB: steps 1 and 3 (~0.8 MiB each) fit with room to spare.
  GS_RUN_IN_TMPFS("checkpoint", 4096, 400);
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GS_FAULT_RANK")) return rank_main();
  ::testing::InitGoogleTest(&argc, argv);
  faults::register_scenario({{"checkpoint", checkpoint_scenario}});
  return RUN_ALL_TESTS();
}
