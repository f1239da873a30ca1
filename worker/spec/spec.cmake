# greenshard_spec: the contract between the controller and the worker, the
# one thing the controller takes from worker/ or shard/ (docs/architecture.md).
# LibTorch-free. It holds
#   job_spec     the worker's job-spec fields, parsing and validation, and the
#                Kubernetes launch variables it reads (resolve_launch)
#   run_summary  how a run ended (written by the reporter, read by both
#                executors and the scheduler)
#   status_push  rank 0's progress push (written by the reporter, read by
#                the controller's POST /v1/jobs/{id}/status)
#   rank_env     the rank environment a gang is launched with
#   ca_bundle    PEM bundles https:// peers are verified with
# and re-exports shard's LibTorch-free vocabulary (shard_names: strategy
# names, object-store URLs, the torchrun variables) in shard_vocabulary.h.
# Included by the top-level CMakeLists.txt so it is built even when worker/
# is skipped (the controller image: GREENSHARD_SKIP_DIRS=shard;worker).
# Links carbon/ (hardware profile names), defined by carbon/CMakeLists.txt.
if(NOT TARGET greenshard_spec)
  include(${CMAKE_CURRENT_LIST_DIR}/../../shard/names.cmake)
  add_library(greenshard_spec STATIC
    ${CMAKE_CURRENT_LIST_DIR}/job_spec.cpp
    ${CMAKE_CURRENT_LIST_DIR}/ca_bundle.cpp
    ${CMAKE_CURRENT_LIST_DIR}/run_summary.cpp
    ${CMAKE_CURRENT_LIST_DIR}/status_push.cpp)
  target_include_directories(greenshard_spec PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../..)
  target_link_libraries(greenshard_spec
    PUBLIC shard_names nlohmann_json::nlohmann_json
    PRIVATE carbon yaml-cpp)
  # PEM bundles are read with libcrypto; a build without OpenSSL refuses them.
  target_link_libraries(greenshard_spec PRIVATE greenshard_crypto)
endif()
