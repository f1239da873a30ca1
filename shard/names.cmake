# shard_names: shard/strategy_names.h (the sharding strategies and their
# names) without LibTorch, for the job-spec schema that the controller links.
# Included by the top-level CMakeLists.txt (through worker/spec/spec.cmake)
# so it exists when shard/ itself is skipped (the controller image).
if(NOT TARGET shard_names)
  add_library(shard_names INTERFACE)
  target_include_directories(shard_names INTERFACE ${CMAKE_CURRENT_LIST_DIR}/include)
endif()
