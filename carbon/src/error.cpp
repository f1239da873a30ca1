#include "carbon/error.h"

namespace carbon {

namespace {
std::string where(const std::string& file, int line, int column) {
  std::string s = file;
  if (line > 0) s.append(1, ':').append(std::to_string(line));
  if (column > 0) s.append(1, ':').append(std::to_string(column));
  return s;
}
}  // namespace

InputError::InputError(std::string file, int line, int column, const std::string& message)
    : CarbonError(where(file, line, column) + ": " + message), file_(std::move(file)), line_(line), column_(column) {}

ProviderError::ProviderError(Kind kind, const std::string& message)
    : CarbonError(std::string(kind_name(kind)) + ": " + message), kind_(kind) {}

const char* ProviderError::kind_name(Kind k) {
  switch (k) {
    case Kind::kTimeout: return "timeout";
    case Kind::kHttp: return "http error";
    case Kind::kMalformed: return "malformed response";
    case Kind::kGap: return "gap in data";
    case Kind::kStale: return "stale data";
    case Kind::kNoData: return "no data";
  }
  return "error";
}

}  // namespace carbon
