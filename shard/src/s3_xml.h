// The S3 client's XML (s3_client.cpp): a small reader for the responses it
// reads (ListBucketResult, ListMultipartUploadsResult,
// InitiateMultipartUploadResult, CompleteMultipartUploadResult, Error) and
// the escaping of the text it writes into request bodies.
//
// Those responses are flat, so a tag extractor reads them: element text
// cannot contain a raw '<' (XML escapes it), so searching for "<Name>" /
// "</Name>" cannot be fooled by a key's content; entities (&amp; &#38; ...)
// are decoded. No XML library.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace shard::s3::detail {

// Text of the first <name>...</name> in xml (entities decoded); nullopt when absent.
std::optional<std::string> xml_text(const std::string& xml, const std::string& name);

// The next element <name>, <name attrs...> or <name/> at or after pos: sets
// [*inner_b, *inner_e) to its content and *after past its end tag.
bool xml_find(const std::string& xml, const std::string& name, size_t pos, size_t* inner_b, size_t* inner_e,
              size_t* after);

// Every element `name` of xml, raw (not unescaped): for <Contents> blocks.
std::vector<std::string> xml_blocks(const std::string& xml, const std::string& name);

// Name of the root element ("" when there is none): skips the <?xml ...?>
// declaration, comments and whitespace.
std::string xml_root(const std::string& xml);

// XML character data with the predefined entities and character references decoded.
std::string xml_unescape(const std::string& s);

// s with & < > " escaped, for element text.
std::string xml_escape(const std::string& s);

}  // namespace shard::s3::detail
