# worker_job_schema: the worker's job-spec fields, parsing and validation
# (worker/config.cpp), and the run summary it reports (worker/run_summary.h);
# no LibTorch. The worker links it through
# greenshard_jobspec; the controller links it to check `worker` at submit.
# Included by the top-level CMakeLists.txt so it is built even when worker/
# is skipped (the controller image: GREENSHARD_SKIP_DIRS=shard;worker).
# Links carbon/ (hardware profile names), defined by carbon/CMakeLists.txt.
if(NOT TARGET worker_job_schema)
  find_package(yaml-cpp REQUIRED)
  find_package(nlohmann_json 3 REQUIRED)
  include(${CMAKE_CURRENT_LIST_DIR}/../shard/names.cmake)
  find_package(OpenSSL REQUIRED)
  add_library(worker_job_schema STATIC ${CMAKE_CURRENT_LIST_DIR}/config.cpp ${CMAKE_CURRENT_LIST_DIR}/ca_bundle.cpp
    ${CMAKE_CURRENT_LIST_DIR}/run_summary.cpp)
  target_include_directories(worker_job_schema PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(worker_job_schema
    PUBLIC shard_names
    PRIVATE carbon yaml-cpp nlohmann_json::nlohmann_json OpenSSL::Crypto)
endif()
