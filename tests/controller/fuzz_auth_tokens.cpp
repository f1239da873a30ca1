// libFuzzer target for the tokens file (controller/api/auth.cpp Auth::from_text,
// the parser behind Auth::load_file and AuthReloader), then authenticate()
// on every line's first field as a bearer token. Parsing may only throw
// std::runtime_error; authenticate() only ApiError 401/403.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "controller/api/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  controller::Auth a;
  try {
    a = controller::Auth::from_text(text, "tokens");
  } catch (const controller::ApiError&) {
    std::abort();
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line) && n++ < 64) {
    const std::string token = line.substr(0, line.find(','));
    try {
      const std::string header = "Bearer " + token;
      auto p = a.authenticate(header);
      auto t = controller::bearer_token(header);
      if (!t || !a.lookup(*t) || a.lookup(*t)->tenant != p.tenant) std::abort();
    } catch (const controller::ApiError& e) {
      if (e.status != 401 && e.status != 403) std::abort();
    }
  }
  return 0;
}
