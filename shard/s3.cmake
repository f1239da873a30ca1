# shard_s3: the S3 client of the checkpoint store (src/s3_*.*) on libcurl
# (transport, SigV4 signing) and OpenSSL libcrypto (body hashes over plain
# http), without LibTorch: shard links it, and so does s3_client_test, which
# then needs no LibTorch build. Included by shard/CMakeLists.txt and by
# bench/gpu's standalone build; the includer has found CURL, OpenSSL and
# Threads.
if(NOT TARGET shard_s3)
  add_library(shard_s3 STATIC
    ${CMAKE_CURRENT_LIST_DIR}/src/s3_xml.cpp
    ${CMAKE_CURRENT_LIST_DIR}/src/s3_signing.cpp
    ${CMAKE_CURRENT_LIST_DIR}/src/s3_config.cpp
    ${CMAKE_CURRENT_LIST_DIR}/src/s3_client.cpp)
  # include/: shard/object_store_error.h and shard/object_store_url.h.
  target_include_directories(shard_s3 PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
  target_link_libraries(shard_s3 PRIVATE CURL::libcurl OpenSSL::Crypto Threads::Threads)
endif()
