# Test kinds. Every CTest test carries exactly one of four labels:
#   unit       in one process of ours (it may start a real server or a
#              shell script: SQLite, s3rver, a socket peer)
#   multirank  the test binary re-executes itself as rank processes
#              (Gloo on loopback)
#   e2e        our shipped programs run as processes (controller, worker,
#              CLI, sim, the quickstart, images)
#   build      the build and packaging checks: compile checks, the rooms'
#              include check, the fuzz targets' builds, the chart and
#              Dockerfile checks
# A GoogleTest binary's tests share one kind, its heaviest (communicator_test's
# environment-parsing cases are multirank with the rest of it),
# so `ctest -L unit` is the quick loop and `ctest -L multirank` the shard
# layer. scripts/test.sh refuses a test with none (ctest -N -LE).
#
# gs_label_directory_tests(KIND) gives KIND to every test that add_test
# defined in the calling directory and that has no kind yet (call it last;
# set the exceptions first with set_tests_properties(... LABELS ...)).
# Tests from gtest_discover_tests get theirs in its PROPERTIES.
set(GS_TEST_KINDS unit multirank e2e build)

function(gs_label_directory_tests kind)
  if(NOT kind IN_LIST GS_TEST_KINDS)
    message(FATAL_ERROR "gs_label_directory_tests: '${kind}' is not one of ${GS_TEST_KINDS}")
  endif()
  get_directory_property(tests TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} LABELS labels)
    if(NOT labels)
      set(labels "")  # NOTFOUND: none yet
    endif()
    set(has_kind FALSE)
    foreach(k IN LISTS GS_TEST_KINDS)
      if(k IN_LIST labels)
        set(has_kind TRUE)
      endif()
    endforeach()
    if(NOT has_kind)
      list(APPEND labels ${kind})
      set_tests_properties(${t} PROPERTIES LABELS "${labels}")
    endif()
  endforeach()
endfunction()
