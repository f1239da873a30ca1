# bench/carbon_policies: carbon-aware placement policies on a year of data,
# by carbon/'s simulator (library engine) and through the controller's own
# scheduler (service engine, controller/tools/sim_engine.h).
add_executable(bench_carbon_policies ${CMAKE_CURRENT_LIST_DIR}/carbon_policies.cpp)
target_link_libraries(bench_carbon_policies PRIVATE controller carbon carbon_lp_bound)

# The benchmark never ends in std::terminate: an exception (here: a data
# folder that is not one) is a message and exit 1 (issue 36).
if(GREENSHARD_TESTS)
  add_test(NAME bench.carbon_policies.an_error_is_a_message_not_an_abort
           COMMAND sh -c "GREENSHARD_CARBON_DATA=/nonexistent \"$1\" 2>&1; echo exit=$?" sh $<TARGET_FILE:bench_carbon_policies>)
  set_tests_properties(bench.carbon_policies.an_error_is_a_message_not_an_abort PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION "bench_carbon_policies: error: GREENSHARD_CARBON_DATA=/nonexistent: not a directory\nexit=1")
endif()
