# bench_controller_load: submissions/s and latency against a controller with
# the durable SQLite store (scripts/bench.sh controller_load).
if(TARGET controller)
  add_executable(bench_controller_load ${CMAKE_CURRENT_SOURCE_DIR}/controller_load.cpp)
  target_link_libraries(bench_controller_load PRIVATE controller greenshard_httplib)
endif()
