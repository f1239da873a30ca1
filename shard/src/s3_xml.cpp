// The S3 client's XML reader and escaper. See s3_xml.h for the contract.
#include "s3_xml.h"

#include "s3_text.h"

#include <cstdlib>

namespace shard::s3::detail {
namespace {

// Appends code point cp to out in UTF-8.
void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::optional<std::string> xml_text(const std::string& xml, const std::string& name) {
  size_t b = 0, e = 0, after = 0;
  if (!xml_find(xml, name, 0, &b, &e, &after)) return std::nullopt;
  return xml_unescape(xml.substr(b, e - b));
}

bool xml_find(const std::string& xml, const std::string& name, size_t pos, size_t* inner_b,
              size_t* inner_e, size_t* after) {
  const std::string open = "<" + name;
  const std::string close = "</" + name + ">";
  while (true) {
    size_t p = xml.find(open, pos);
    if (p == std::string::npos) return false;
    size_t q = p + open.size();
    if (q >= xml.size()) return false;
    const char c = xml[q];
    if (c != '>' && c != '/' && !is_space(c)) {  // a longer name, e.g. <KeyCount> for <Key>
      pos = q;
      continue;
    }
    size_t gt = xml.find('>', q);
    if (gt == std::string::npos) return false;
    if (xml[gt - 1] == '/') {  // <name/>
      *inner_b = *inner_e = *after = gt + 1;
      return true;
    }
    size_t e = xml.find(close, gt + 1);
    if (e == std::string::npos) return false;
    *inner_b = gt + 1;
    *inner_e = e;
    *after = e + close.size();
    return true;
  }
}

std::vector<std::string> xml_blocks(const std::string& xml, const std::string& name) {
  std::vector<std::string> out;
  size_t pos = 0, b = 0, e = 0;
  while (xml_find(xml, name, pos, &b, &e, &pos)) out.push_back(xml.substr(b, e - b));
  return out;
}

std::string xml_root(const std::string& xml) {
  size_t i = 0;
  while (i < xml.size()) {
    if (is_space(xml[i])) {
      ++i;
    } else if (xml.compare(i, 2, "<?") == 0) {
      size_t e = xml.find("?>", i);
      if (e == std::string::npos) return "";
      i = e + 2;
    } else if (xml.compare(i, 4, "<!--") == 0) {
      size_t e = xml.find("-->", i);
      if (e == std::string::npos) return "";
      i = e + 3;
    } else if (xml[i] == '<') {
      size_t e = i + 1;
      while (e < xml.size() && xml[e] != '>' && xml[e] != '/' && !is_space(xml[e])) ++e;
      return xml.substr(i + 1, e - i - 1);
    } else {
      return "";
    }
  }
  return "";
}

std::string xml_unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 12) {
      out += s[i];  // not an entity: keep the '&'
      continue;
    }
    std::string ent = s.substr(i + 1, semi - i - 1);
    unsigned long cp = 0;
    bool ok = true;
    if (ent == "amp") cp = '&';
    else if (ent == "lt") cp = '<';
    else if (ent == "gt") cp = '>';
    else if (ent == "quot") cp = '"';
    else if (ent == "apos") cp = '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      const bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string digits = ent.substr(hex ? 2 : 1);
      char* end = nullptr;
      cp = digits.empty() ? 0 : std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      ok = !digits.empty() && end && *end == '\0' && cp > 0 && cp <= 0x10FFFF;
    } else {
      ok = false;
    }
    if (!ok) {
      out += s[i];
      continue;
    }
    append_utf8(out, cp);
    i = semi;
  }
  return out;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace shard::s3::detail
