// The OpenAPI 3 document of the REST API (see api.h for the routes). Written
// by hand, not generated from the route table, so that a test comparing the
// two can fail.
#pragma once
#include <nlohmann/json.hpp>
namespace controller {
nlohmann::json openapi_document();
}
