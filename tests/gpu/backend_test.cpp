// Backend selection in any build (runs without a GPU): which backend a
// compute device gets, and what a build without GREENSHARD_CUDA answers to
// an NCCL group.
#include "shard/launch.h"  // free_loopback_port
#include "shard/rendezvous.h"

#include <gtest/gtest.h>

namespace {

std::shared_ptr<shard::Rendezvous> one_rank() {
  shard::RendezvousInfo info;
  info.master_addr = "127.0.0.1";
  info.master_port = shard::free_loopback_port();
  return shard::Rendezvous::connect(info);
}

TEST(Backend, Names) {
  EXPECT_STREQ(shard::to_string(shard::Backend::kGloo), "gloo");
  EXPECT_STREQ(shard::to_string(shard::Backend::kNccl), "nccl");
}

TEST(Backend, ForDevice) {
  EXPECT_EQ(shard::backend_for(c10::Device(c10::kCPU)), shard::Backend::kGloo);
#ifdef GREENSHARD_CUDA
  EXPECT_EQ(shard::backend_for(c10::Device(c10::kCUDA, 0)), shard::Backend::kNccl);
#else
  EXPECT_EQ(shard::backend_for(c10::Device(c10::kCUDA, 0)), shard::Backend::kGloo);
#endif
}

TEST(Backend, GlooGroupThroughBackendOverload) {
  auto rdzv = one_rank();
  auto a = rdzv->new_group("g", {0}, shard::Backend::kGloo);
  EXPECT_EQ(a->backend_name(), "gloo");
  EXPECT_EQ(rdzv->new_group("g", {0}), a);  // same name, same communicator
}

#ifndef GREENSHARD_CUDA
TEST(Backend, NcclUnavailableWithoutCuda) {
  auto rdzv = one_rank();
  try {
    rdzv->new_group("n", {0}, shard::Backend::kNccl);
    FAIL() << "expected CommError";
  } catch (const shard::CommError& e) {
    EXPECT_NE(std::string(e.what()).find("backend nccl is not available in this build"), std::string::npos)
        << e.what();
  }
}
#else
TEST(Backend, NameBoundToOneBackend) {
  auto rdzv = one_rank();
  rdzv->new_group("g", {0}, shard::Backend::kGloo);
  EXPECT_THROW(rdzv->new_group("g", {0}, shard::Backend::kNccl), std::invalid_argument);
}
#endif

}  // namespace
