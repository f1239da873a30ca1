# cmake -DCLANGXX=... -DSRC=<repo> -DOUT=<dir> -DSECONDS=<n> -P fuzz.cmake
# Builds the parser fuzzer with clang++ -fsanitize=fuzzer (libFuzzer) and runs
# it briefly on the seed corpus. The parsers are compiled into the fuzzer
# itself so that they are instrumented.
file(MAKE_DIRECTORY ${OUT}/corpus)
file(GLOB seeds ${SRC}/tests/controller/fuzz_corpus/*)
file(COPY ${seeds} DESTINATION ${OUT}/corpus)
set(bin ${OUT}/fuzz_parsers)
if(NOT EXISTS ${bin} OR ${SRC}/controller/api_types.cpp IS_NEWER_THAN ${bin}
   OR ${SRC}/controller/job.cpp IS_NEWER_THAN ${bin}
   OR ${SRC}/carbon/src/job.cpp IS_NEWER_THAN ${bin}
   OR ${SRC}/worker/config.cpp IS_NEWER_THAN ${bin}
   OR ${SRC}/tests/controller/fuzz_parsers.cpp IS_NEWER_THAN ${bin})
  execute_process(
    COMMAND ${CLANGXX} -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I${SRC}
            -I${SRC}/carbon/include -I${SRC}/shard/include
            ${SRC}/tests/controller/fuzz_parsers.cpp ${SRC}/controller/api_types.cpp ${SRC}/controller/job.cpp
            ${SRC}/worker/config.cpp ${SRC}/carbon/src/hardware.cpp ${SRC}/carbon/src/error.cpp
            ${SRC}/carbon/src/job.cpp
            -lcrypto -lyaml-cpp -o ${bin}
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the fuzzer failed (${rc})")
  endif()
endif()
execute_process(COMMAND ${bin} -max_total_time=${SECONDS} -rss_limit_mb=2048 -timeout=10 ${OUT}/corpus
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a crash (${rc}); see the crash-* file in the working directory")
endif()
