# bench/carbon_policies: carbon-aware placement policies on a year of data,
# by carbon/'s simulator (library engine) and through the controller's own
# scheduler (service engine, controller/tools/sim_engine.h).
add_executable(bench_carbon_policies ${CMAKE_CURRENT_LIST_DIR}/carbon_policies.cpp)
target_link_libraries(bench_carbon_policies PRIVATE controller carbon carbon_lp_bound)
