// libFuzzer target for the REST body parsers: the job spec (POST /v1/jobs)
// with the worker's job-spec schema,
// the worker status push (POST /v1/jobs/{id}/status), and the canonical
// round trip of an accepted spec. Built with clang++ -fsanitize=fuzzer,
// address,undefined by fuzz.cmake and run for a few seconds in CTest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "controller/core/api_types.h"
#include "controller/core/job.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    controller::JobSpec s = controller::parse_job_spec_text(text);
    // The worker's own schema (worker/config.cpp), as POST /v1/jobs checks it.
    controller::check_worker_spec(s.worker);
    // An accepted spec must survive its canonical form unchanged.
    auto canon = s.to_json();
    if (controller::parse_job_spec(canon).to_json() != canon) std::abort();
    // ...and a job built from it must survive the store's document form.
    controller::Job j("jfuzz", "t", s, 1);
    if (controller::Job::from_document(j.to_document()).to_document() != j.to_document()) std::abort();
  } catch (const controller::ApiError& e) {
    if (e.status < 400 || e.status > 499) std::abort();
  }
  auto body = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!body.is_discarded()) {
    try {
      controller::parse_worker_status(body);
    } catch (const controller::ApiError& e) {
      if (e.status != 400) std::abort();
    }
  }
  return 0;
}
