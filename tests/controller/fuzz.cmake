# cmake -DCLANGXX=... -DSRC=<repo> -DOUT=<dir> -DSECONDS=<n> [-DFUZZER=<name>] [-DLIBS=<a.a|b.a>] -P fuzz.cmake
# Builds one libFuzzer target with clang++ -fsanitize=fuzzer,address,undefined
# and runs it briefly on its seed corpus. The parsers a target fuzzes are
# compiled into the fuzzer itself so that they are instrumented; what they
# call beyond that (a few targets only) comes from the project's own static
# libraries, passed in LIBS (uninstrumented, linked after the parsers).
#
# Targets (FUZZER, default fuzz_parsers; source tests/controller/<FUZZER>.cpp,
# seeds tests/controller/fuzz_corpus/<FUZZER>/, fuzz_parsers: the files
# directly in fuzz_corpus/):
#   fuzz_parsers             REST job spec + worker status bodies (controller/core/api_types.cpp, job.cpp)
#   fuzz_worker_config       worker job spec: apply_config_text + validate (worker/spec/job_spec.cpp)
#   fuzz_checkpoint_manifest checkpoint manifest.txt + rank_<r>.crc (shard/src/checkpoint_manifest.cpp)
#   fuzz_carbon_csv          intensity CSV (carbon/src/csv_provider.cpp)
#   fuzz_provider_json       Carbon Aware SDK + Electricity Maps answers (carbon/src/*provider.cpp)
#   fuzz_controller_config   regions.yaml, carbon-source, hardware and quotas YAML (controller/config/regions.cpp, config_files.cpp, quota.cpp)
#   fuzz_kubeconfig          kubeconfig + worker-defaults.yaml (controller/executors/executor_k8s.cpp)
#   fuzz_k8s_answers         the Kubernetes API's Job and pod answers and their verdict (controller/executors/k8s_answers.cpp)
#   fuzz_auth_tokens         the tokens file (controller/api/auth.cpp)
#   fuzz_token_file          the worker's token-file header (worker/data.cpp TokenFile)
#   fuzz_http_request        whole requests as raw bytes: the HTTP edge's framing and every route
#                            (controller/api/http_edge.cpp, api.cpp, api_types.cpp, job.cpp) on a real store
# scripts/fuzz.sh runs the same builds for long campaigns (-DRUN=OFF builds only).
if(NOT DEFINED FUZZER OR FUZZER STREQUAL "")
  set(FUZZER fuzz_parsers)
endif()
if(NOT DEFINED RUN)
  set(RUN ON)
endif()
set(T ${SRC}/tests/controller)
# LIBS: '|'-separated (a ';' list would be split on the add_test command line).
string(REPLACE "|" ";" LIBS "${LIBS}")
set(system_libs -lcpp-httplib -lyaml-cpp -lsqlite3 -lprometheus-cpp-core -lssl -lcrypto -lz -lpthread -ldl)
execute_process(COMMAND pkg-config --cflags cpp-httplib OUTPUT_VARIABLE httplib_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(httplib_flags UNIX_COMMAND "${httplib_flags}")
set(extra_flags "")
set(link_libs "")
if(FUZZER STREQUAL "fuzz_parsers")
  set(sources controller/core/api_types.cpp controller/core/job.cpp controller/core/yaml_json.cpp
              worker/spec/job_spec.cpp worker/spec/status_push.cpp carbon/src/hardware.cpp carbon/src/error.cpp
              carbon/src/job.cpp)
  set(link_libs -lcrypto -lyaml-cpp)
elseif(FUZZER STREQUAL "fuzz_worker_config")
  set(sources worker/spec/job_spec.cpp carbon/src/hardware.cpp carbon/src/error.cpp)
  set(link_libs -lyaml-cpp)
elseif(FUZZER STREQUAL "fuzz_checkpoint_manifest")
  # LibTorch-free: the manifest and chunk-index parsers live apart from checkpoint.cpp.
  set(sources shard/src/checkpoint_manifest.cpp shard/src/crc32c.cpp)
  set(extra_flags -I${SRC}/shard/src)
elseif(FUZZER STREQUAL "fuzz_carbon_csv")
  set(sources carbon/src/csv_provider.cpp carbon/src/csv_line.cpp carbon/src/intensity.cpp carbon/src/time.cpp
              carbon/src/error.cpp)
elseif(FUZZER STREQUAL "fuzz_provider_json")
  # The provider sources and http_json.cpp are #included by the fuzzer
  # (get_json, the HTTP GET, is replaced by one that answers the input; the
  # real one, renamed, still needs the HTTP client and failure explainer).
  set(sources carbon/src/intensity.cpp carbon/src/time.cpp carbon/src/error.cpp carbon/src/http_client.cpp
              carbon/src/http_failure.cpp)
  set(deps carbon/src/carbon_aware_sdk_provider.cpp carbon/src/electricitymaps_provider.cpp carbon/src/http_json.cpp)
  set(extra_flags ${httplib_flags})
  set(link_libs -lcpp-httplib -lssl -lcrypto)
elseif(FUZZER STREQUAL "fuzz_controller_config")
  set(sources controller/config/regions.cpp controller/config/config_files.cpp controller/config/quota.cpp)
  set(extra_flags ${httplib_flags})
  set(link_libs ${LIBS} ${system_libs})
elseif(FUZZER STREQUAL "fuzz_kubeconfig")
  set(sources controller/executors/executor_k8s.cpp controller/core/base64.cpp)
  set(extra_flags ${httplib_flags})
  set(link_libs ${LIBS} ${system_libs})
elseif(FUZZER STREQUAL "fuzz_k8s_answers")
  set(sources controller/executors/k8s_answers.cpp)
  set(link_libs ${LIBS} ${system_libs})
elseif(FUZZER STREQUAL "fuzz_auth_tokens")
  # sha256_hex and ApiError live in api_types.cpp (and what it needs).
  set(sources controller/api/auth.cpp controller/api/file_watch.cpp controller/core/api_types.cpp controller/core/job.cpp
              controller/core/yaml_json.cpp worker/spec/job_spec.cpp worker/spec/status_push.cpp carbon/src/hardware.cpp
              carbon/src/error.cpp carbon/src/job.cpp)
  set(link_libs -lcrypto -lyaml-cpp)
elseif(FUZZER STREQUAL "fuzz_http_request")
  set(sources controller/api/http_edge.cpp controller/api/api.cpp controller/core/api_types.cpp controller/core/job.cpp)
  set(extra_flags ${httplib_flags})
  set(link_libs ${LIBS} ${system_libs})
elseif(FUZZER STREQUAL "fuzz_token_file")
  set(sources worker/data.cpp worker/tokenizer.cpp)
  set(link_libs -ldl -lcrypto)
else()
  message(FATAL_ERROR "unknown fuzz target '${FUZZER}'")
endif()

set(corpus ${OUT}/${FUZZER}-corpus)
file(MAKE_DIRECTORY ${corpus})
if(FUZZER STREQUAL "fuzz_parsers")
  file(GLOB seeds LIST_DIRECTORIES false ${T}/fuzz_corpus/*)
else()
  file(GLOB seeds LIST_DIRECTORIES false ${T}/fuzz_corpus/${FUZZER}/*)
endif()
if(seeds)
  file(COPY ${seeds} DESTINATION ${corpus})
endif()

set(bin ${OUT}/${FUZZER})
set(stale FALSE)
if(NOT EXISTS ${bin} OR ${T}/${FUZZER}.cpp IS_NEWER_THAN ${bin} OR ${T}/fuzz.cmake IS_NEWER_THAN ${bin})
  set(stale TRUE)
endif()
set(abs_sources "")
foreach(s ${sources} ${deps})
  if(${SRC}/${s} IS_NEWER_THAN ${bin})
    set(stale TRUE)
  endif()
endforeach()
foreach(s ${sources})
  list(APPEND abs_sources ${SRC}/${s})
endforeach()
foreach(l ${link_libs})
  if(IS_ABSOLUTE ${l} AND ${l} IS_NEWER_THAN ${bin})
    set(stale TRUE)
  endif()
endforeach()
if(stale)
  message(STATUS "building ${bin}")
  execute_process(
    COMMAND ${CLANGXX} -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I${SRC}
            -I${SRC}/carbon/include -I${SRC}/shard/include ${extra_flags}
            ${T}/${FUZZER}.cpp ${abs_sources} ${link_libs} -o ${bin}.tmp
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building the fuzzer ${FUZZER} failed (${rc})")
  endif()
  file(RENAME ${bin}.tmp ${bin})
endif()
if(RUN)
  execute_process(COMMAND ${bin} -max_total_time=${SECONDS} -rss_limit_mb=2048 -timeout=10 ${corpus}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the fuzzer ${FUZZER} found a crash (${rc}); see the crash-* file in the working directory")
  endif()
endif()
