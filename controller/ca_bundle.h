// PEM CA bundles the controller and the CLI verify https:// peers with
// (--ca-bundle, GREENSHARD_CA_BUNDLE; docs/controller.md "TLS").
#pragma once

#include <string>

namespace controller {

// Number of X.509 certificates in PEM text (0 when none parse).
int pem_certificate_count(const std::string& pem);

// Checks that `path` is a readable file holding at least one PEM
// certificate; throws std::runtime_error "<what>: cannot read '<path>'" or
// "<what>: '<path>' holds no PEM certificate". `what` names the flag or
// variable the path came from.
void check_ca_bundle(const std::string& path, const std::string& what);

}  // namespace controller
