#include "carbon/time.h"

#include <cctype>
#include <cstdio>
#include <stdexcept>

namespace carbon {

using namespace std::chrono;

Time system_clock_now() { return time_point_cast<seconds>(system_clock::now()); }

Time floor_hour(Time t) { return std::chrono::floor<hours>(t); }
Time ceil_hour(Time t) { return std::chrono::ceil<hours>(t); }

namespace {

// Reads exactly n digits at s[*pos]; advances *pos.
bool digits(std::string_view s, size_t* pos, int n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool expect(std::string_view s, size_t* pos, char c) {
  if (*pos < s.size() && s[*pos] == c) {
    ++*pos;
    return true;
  }
  return false;
}

}  // namespace

bool parse_time(std::string_view s, Time* out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return false;
  // Integer unix seconds.
  bool all_digits = true;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(std::isdigit(static_cast<unsigned char>(s[i])) || (i == 0 && s[i] == '-' && s.size() > 1))) all_digits = false;
  if (all_digits) {
    if (s.size() > 12) return false;
    *out = from_unix(std::stoll(std::string(s)));
    return true;
  }
  size_t p = 0;
  int Y = 0, M = 0, D = 0, h = 0, m = 0, sec = 0;
  if (!digits(s, &p, 4, &Y) || !expect(s, &p, '-') || !digits(s, &p, 2, &M) || !expect(s, &p, '-') ||
      !digits(s, &p, 2, &D))
    return false;
  if (p < s.size()) {
    if (s[p] != 'T' && s[p] != ' ') return false;
    ++p;
    if (!digits(s, &p, 2, &h) || !expect(s, &p, ':') || !digits(s, &p, 2, &m)) return false;
    if (expect(s, &p, ':')) {
      if (!digits(s, &p, 2, &sec)) return false;
      if (expect(s, &p, '.')) {
        size_t n = 0;
        while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p, ++n;
        if (n == 0) return false;
      }
    }
  }
  int offset_min = 0;
  if (p < s.size()) {
    if (s[p] == 'Z' && p + 1 == s.size()) {
      ++p;
    } else if (s[p] == '+' || s[p] == '-') {
      int sign = s[p] == '+' ? 1 : -1;
      ++p;
      int oh, om;
      if (!digits(s, &p, 2, &oh)) return false;
      expect(s, &p, ':');
      if (!digits(s, &p, 2, &om)) return false;
      offset_min = sign * (oh * 60 + om);
    } else {
      return false;
    }
  }
  if (p != s.size()) return false;
  if (h > 23 || m > 59 || sec > 60) return false;
  year_month_day ymd{year{Y}, month{static_cast<unsigned>(M)}, day{static_cast<unsigned>(D)}};
  if (!ymd.ok()) return false;
  *out = Time{sys_days{ymd}} + hours{h} + minutes{m} + seconds{sec} - minutes{offset_min};
  return true;
}

Time parse_time(std::string_view text) {
  Time t;
  if (!parse_time(text, &t)) throw std::invalid_argument("not a UTC timestamp: '" + std::string(text) + "'");
  return t;
}

std::string format_time(Time t) {
  auto day = std::chrono::floor<days>(t);
  year_month_day ymd{day};
  hh_mm_ss hms{t - day};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02ld:%02ld:%02ldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long>(hms.hours().count()), static_cast<long>(hms.minutes().count()),
                static_cast<long>(hms.seconds().count()));
  return buf;
}

int hour_of_day(Time t) {
  auto day = std::chrono::floor<days>(t);
  return static_cast<int>(std::chrono::duration_cast<hours>(t - day).count());
}

int weekday(Time t) { return static_cast<int>(year_month_weekday{std::chrono::floor<days>(t)}.weekday().c_encoding()); }

}  // namespace carbon
