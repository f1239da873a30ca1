// Base64 in the two alphabets the controller uses:
//   kStandard  RFC 4648 section 4 ('+', '/'), '=' padded: Kubernetes
//              certificate-authority-data, Secret data;
//   kUrl       RFC 4648 section 5 ('-', '_'), unpadded: opaque `continue`
//              tokens.
#pragma once

#include <optional>
#include <string>

namespace controller {

enum class Base64 { kStandard, kUrl };

std::string base64_encode(const std::string& bytes, Base64 alphabet);

// nullopt when malformed. kStandard ignores white space and requires whole
// '='-padded quads (at least one, no data after padding); kUrl takes no
// padding and no white space.
std::optional<std::string> base64_decode(const std::string& text, Base64 alphabet);

}  // namespace controller
