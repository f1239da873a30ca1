// Compile-check shim (only on the include path of shard_nccl_compile_check).
// Debian's libtorch-dev 1.13 ships the c10/cuda headers but not this file,
// which PyTorch generates at build time from cuda_cmake_macros.h.in. A CUDA
// LibTorch 2.x has its own copy; this one is never used there.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
