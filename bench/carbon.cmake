# bench/carbon_policies: carbon-aware placement policies on a year of data.
add_executable(bench_carbon_policies ${CMAKE_CURRENT_LIST_DIR}/carbon_policies.cpp)
target_link_libraries(bench_carbon_policies PRIVATE carbon)
