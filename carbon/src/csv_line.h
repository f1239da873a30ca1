// Internal: RFC 4180-ish splitting of one CSV line (quotes, "" escapes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace carbon::detail {

// Splits `line` (no trailing newline; a trailing '\r' is dropped) into
// fields. Returns false on an unterminated quote.
bool split_csv_line(std::string_view line, std::vector<std::string>& fields);

// Splits text into lines (handles \n and \r\n); strips a UTF-8 BOM.
std::vector<std::string_view> split_lines(std::string_view text);

// Trims ASCII whitespace.
std::string_view trim(std::string_view s);

// Parses a finite double (whole field, surrounding spaces allowed).
bool parse_double(std::string_view s, double* out);

std::string read_file(const std::string& path);   // throws InputError(path,0,0) when unreadable

}  // namespace carbon::detail
