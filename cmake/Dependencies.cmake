# Every third-party dependency, found once (included by the top-level
# CMakeLists.txt before any folder).
#
# The system's packages come first: on a Debian machine set up by
# scripts/setup.sh every one is found and nothing below the "carried" lines
# runs. A machine with only a LibTorch, CMake, a C++20 compiler and ninja (a
# GPU machine, or the bare container of tests/images/worker_bare_build_test.sh)
# lacks them; there each missing one comes from the carried folder
# GREENSHARD_THIRD_PARTY (default third_party/, git-ignored, prepared from
# Debian's packages by scripts/gpu_deps.sh prepare):
#   yaml-cpp/, prometheus-cpp/   source packages, built here as static libraries
#   include/                     header-only: nlohmann/, CLI/, httplib.h (the
#                                single header of the cpp-httplib source
#                                package), gloo/ (libgloo-dev's headers, for a
#                                LibTorch that ships libgloo.so.0, as Debian's)
#
# Optional parts: where a dependency is missing from both, the part that
# needs it is left out of the build with a STATUS line, and the binary
# refuses that input at run time naming why:
#   OpenSSL        TLS (https:// peers), CA bundles, SentencePiece model hashes
#   libcurl        S3 checkpoints (with OpenSSL: SigV4)
#   sentencepiece  BPE tokens (the byte tokenizer needs nothing)
#   Gloo           CPU collectives; a CUDA build without it puts every group
#                  on NCCL (GREENSHARD_NO_GLOO)
#   GLPK           the LP bound's check (carbon_lp_bound: tests and bench only)
#   CLP            the LP bound's solver (carbon_lp_bound: tests and bench only)
#   SQLite3        the controller's store (controller/ refuses to configure
#                  without it; the worker does not need it)
#
# Results: targets yaml-cpp, nlohmann_json::nlohmann_json, CLI11::CLI11,
# prometheus-cpp::core, greenshard_httplib, greenshard_crypto,
# greenshard_gloo (when found);
# variables GREENSHARD_HAVE_OPENSSL, _CURL, _SENTENCEPIECE, _GLOO, _GLPK, _CLP,
# _SQLITE3.
set(GREENSHARD_THIRD_PARTY "${CMAKE_CURRENT_SOURCE_DIR}/third_party" CACHE PATH
    "Carried third-party sources and headers (scripts/gpu_deps.sh prepare), used where the system lacks a package")
set(_gs_tp "${GREENSHARD_THIRD_PARTY}")
set(GREENSHARD_CARRIED_DEPS "")

function(_gs_need_carried what path)
  if(NOT EXISTS "${_gs_tp}/${path}")
    message(FATAL_ERROR "${what} not found on this system, and not in the carried folder "
                        "'${_gs_tp}' (no ${path}). Install it (scripts/setup.sh on Debian) or prepare the "
                        "folder on a machine that has it: scripts/gpu_deps.sh prepare")
  endif()
endfunction()

# A carried source package built as part of this build: its folder under
# the carried one, then its options, each NAME=VALUE, forced into the cache.
function(_gs_add_carried_source name)
  _gs_need_carried("${name}" ${name}/CMakeLists.txt)
  foreach(_opt ${ARGN})
    string(REGEX MATCH "^([^=]+)=(.*)$" _ "${_opt}")
    set(${CMAKE_MATCH_1} ${CMAKE_MATCH_2} CACHE BOOL "" FORCE)
  endforeach()
  add_subdirectory("${_gs_tp}/${name}" "${CMAKE_BINARY_DIR}/third_party/${name}" EXCLUDE_FROM_ALL SYSTEM)
endfunction()

# A carried header-only library as the imported target the system's package
# would define (the carried include/ folder); `header` proves it is there.
macro(_gs_add_carried_headers name target header)
  _gs_need_carried("${name}" ${header})
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE "${_gs_tp}/include")
  list(APPEND GREENSHARD_CARRIED_DEPS ${name})
endmacro()

find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)

# --- nlohmann/json (header-only) ---
find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND)
  _gs_add_carried_headers(nlohmann_json nlohmann_json::nlohmann_json include/nlohmann/json.hpp)
endif()

# --- CLI11 (header-only) ---
find_package(CLI11 QUIET)
if(NOT CLI11_FOUND)
  _gs_add_carried_headers(CLI11 CLI11::CLI11 include/CLI/CLI.hpp)
endif()

# --- yaml-cpp (compiled) ---
find_package(yaml-cpp QUIET)
if(NOT yaml-cpp_FOUND)
  _gs_add_carried_source(yaml-cpp YAML_CPP_BUILD_TESTS=OFF YAML_CPP_BUILD_TOOLS=OFF YAML_CPP_BUILD_CONTRIB=OFF
                         YAML_CPP_INSTALL=OFF YAML_BUILD_SHARED_LIBS=OFF)
  set_target_properties(yaml-cpp PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(APPEND GREENSHARD_CARRIED_DEPS yaml-cpp)
endif()

# --- prometheus-cpp (compiled; the core library only: the worker and the
# controller serve /metrics themselves) ---
find_package(prometheus-cpp CONFIG QUIET)
if(NOT prometheus-cpp_FOUND)
  _gs_add_carried_source(prometheus-cpp ENABLE_PULL=OFF ENABLE_PUSH=OFF ENABLE_COMPRESSION=OFF ENABLE_TESTING=OFF
                         USE_THIRDPARTY_LIBRARIES=OFF OVERRIDE_CXX_STANDARD_FLAGS=OFF GENERATE_PKGCONFIG=OFF)
  list(APPEND GREENSHARD_CARRIED_DEPS prometheus-cpp)
endif()

# --- OpenSSL (optional) ---
find_package(OpenSSL QUIET)
set(GREENSHARD_HAVE_OPENSSL ${OPENSSL_FOUND})
# libcrypto (hashes, PEM bundles) for the folders that use it: linked where
# there is one, else GREENSHARD_NO_OPENSSL for the code to refuse that input.
add_library(greenshard_crypto INTERFACE)
if(GREENSHARD_HAVE_OPENSSL)
  target_link_libraries(greenshard_crypto INTERFACE OpenSSL::Crypto)
else()
  target_compile_definitions(greenshard_crypto INTERFACE GREENSHARD_NO_OPENSSL=1)
endif()

# --- cpp-httplib: Debian's compiled library (its split header), else the
# carried single header; with OpenSSL where there is one ---
add_library(greenshard_httplib INTERFACE)
if(PkgConfig_FOUND)
  pkg_check_modules(GS_HTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
endif()
if(GS_HTTPLIB_FOUND)
  # Its compile definitions (CPPHTTPLIB_OPENSSL_SUPPORT ...) must reach every
  # translation unit that includes httplib.h: they come with the target.
  target_link_libraries(greenshard_httplib INTERFACE PkgConfig::GS_HTTPLIB)
else()
  _gs_need_carried("cpp-httplib" include/httplib.h)
  target_include_directories(greenshard_httplib SYSTEM INTERFACE "${_gs_tp}/include")
  target_link_libraries(greenshard_httplib INTERFACE Threads::Threads)
  if(GREENSHARD_HAVE_OPENSSL)
    target_compile_definitions(greenshard_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT)
    target_link_libraries(greenshard_httplib INTERFACE OpenSSL::SSL OpenSSL::Crypto)
  endif()
  list(APPEND GREENSHARD_CARRIED_DEPS cpp-httplib)
endif()

# --- SQLite (the controller's store; the worker does not need it) ---
find_package(SQLite3 QUIET)
set(GREENSHARD_HAVE_SQLITE3 ${SQLite3_FOUND})

# --- libcurl (optional: S3 checkpoints) ---
find_package(CURL QUIET)
set(GREENSHARD_HAVE_CURL ${CURL_FOUND})

# --- SentencePiece (optional: BPE tokens) ---
set(GREENSHARD_HAVE_SENTENCEPIECE OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
  set(GREENSHARD_HAVE_SENTENCEPIECE ${SENTENCEPIECE_FOUND})
endif()

# --- Gloo: the system's headers and library, else the carried headers with
# the libgloo.so.0 that a LibTorch package brings (Debian's libgloo0) ---
find_path(GLOO_INCLUDE_DIR gloo/context.h)
if(NOT GLOO_INCLUDE_DIR AND EXISTS "${_gs_tp}/include/gloo/context.h")
  set(GLOO_INCLUDE_DIR "${_gs_tp}/include" CACHE PATH "" FORCE)
endif()
find_library(GLOO_LIBRARY NAMES gloo libgloo.so.0)
set(GREENSHARD_HAVE_GLOO OFF)
if(GLOO_INCLUDE_DIR AND GLOO_LIBRARY)
  set(GREENSHARD_HAVE_GLOO ON)
  add_library(greenshard_gloo INTERFACE)
  target_link_libraries(greenshard_gloo INTERFACE ${GLOO_LIBRARY})
  target_include_directories(greenshard_gloo SYSTEM INTERFACE ${GLOO_INCLUDE_DIR})
endif()

# --- GLPK (the LP bound: tests and bench only; never in a shipped binary) ---
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
set(GREENSHARD_HAVE_GLPK OFF)
if(GLPK_INCLUDE_DIR AND GLPK_LIBRARY)
  set(GREENSHARD_HAVE_GLPK ON)
endif()

# --- CLP (the LP bound's solver: tests and bench only, like GLPK; EPL-2.0) ---
set(GREENSHARD_HAVE_CLP OFF)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(CLP QUIET IMPORTED_TARGET clp)
  if(CLP_FOUND)
    set(GREENSHARD_HAVE_CLP ON)
  endif()
endif()

# ON or OFF, whatever the find module left (TRUE, 1, empty ...).
foreach(_gs_dep OPENSSL CURL SENTENCEPIECE GLOO GLPK CLP SQLITE3)
  if(GREENSHARD_HAVE_${_gs_dep})
    set(GREENSHARD_HAVE_${_gs_dep} ON)
  else()
    set(GREENSHARD_HAVE_${_gs_dep} OFF)
  endif()
endforeach()
if(GREENSHARD_CARRIED_DEPS)
  list(JOIN GREENSHARD_CARRIED_DEPS " " _gs_list)
  set(_gs_carried "carried from ${_gs_tp}: ${_gs_list}")
else()
  set(_gs_carried "all from the system")
endif()
message(STATUS "GreenShard dependencies: ${_gs_carried}; OpenSSL ${GREENSHARD_HAVE_OPENSSL}, libcurl ${GREENSHARD_HAVE_CURL}, "
               "sentencepiece ${GREENSHARD_HAVE_SENTENCEPIECE}, Gloo ${GREENSHARD_HAVE_GLOO}, GLPK ${GREENSHARD_HAVE_GLPK}, CLP ${GREENSHARD_HAVE_CLP}")
