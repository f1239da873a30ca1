// Errors raised by carbon/. Every external input is validated; a failure is
// one of these exceptions with a message that says what and where.
#pragma once

#include <stdexcept>
#include <string>

namespace carbon {

// Base class of every carbon/ error.
class CarbonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad file input (CSV data, trace). what() reads
//   "<file>:<line>:<column>: <message>"
// line and column are 1-based; column 0 = the whole line / file.
class InputError : public CarbonError {
 public:
  InputError(std::string file, int line, int column, const std::string& message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  std::string file_;
  int line_, column_;
};

// A provider could not deliver usable data. kind() says why.
class ProviderError : public CarbonError {
 public:
  enum class Kind {
    kTimeout,      // connection or read timed out / connection refused
    kHttp,         // non-2xx HTTP status
    kMalformed,    // body is not the documented JSON shape
    kGap,          // a hole or a null value in the returned series
    kStale,        // the newest data point is older than allowed
    kNoData,       // zone unknown / empty answer / outside the recorded period
  };
  ProviderError(Kind kind, const std::string& message);
  Kind kind() const { return kind_; }
  static const char* kind_name(Kind k);

 private:
  Kind kind_;
};

}  // namespace carbon
