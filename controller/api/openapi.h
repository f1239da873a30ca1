// The OpenAPI 3 document of the REST API (see api.h for the routes). The
// routes and their responses are written by hand, not generated from the
// route table, so that a test comparing the two can fail
// (tests/openapi/: every response of a real controller is validated against
// this document); every enum with a C++ type (job states, decision
// outcomes) is built from that type's list of values.
#pragma once
#include <nlohmann/json.hpp>
namespace controller {
nlohmann::json openapi_document();
}
