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

# The re-plan timing section runs alone (seconds, not the hour of the whole
# bench) and ends with its RESULT keys; timings are not checked.
if(GREENSHARD_TESTS)
  add_test(NAME bench.carbon_policies.only_replan_runs_the_replan_section_alone
           COMMAND bench_carbon_policies --only replan --cycle-jobs 2000 --cycle-reps 1)
  set_tests_properties(bench.carbon_policies.only_replan_runs_the_replan_section_alone PROPERTIES LABELS unit TIMEOUT 120
    PASS_REGULAR_EXPRESSION "incremental +2000 .*\nfull +2000 +2000 .*\n(.*\n)*RESULT carbon_policies replan_incremental_ms_10k=[0-9.]+ replan_full_ms_10k=[0-9.]+ replan_held=2000 replan_replaced=[1-9][0-9]* replan_speedup=[0-9.]+\n$")
  add_test(NAME bench.carbon_policies.only_names_its_sections COMMAND bench_carbon_policies --only everything)
  set_tests_properties(bench.carbon_policies.only_names_its_sections PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION "--only: expected replan, got 'everything'")
  add_test(NAME bench.carbon_policies.a_bad_seed_list_is_named COMMAND bench_carbon_policies --seeds 1,-2)
  set_tests_properties(bench.carbon_policies.a_bad_seed_list_is_named PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION "--seeds: expected seeds like 1,2,3, got '1,-2'")
endif()
