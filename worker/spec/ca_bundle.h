// PEM CA bundles that https:// peers are verified with: the CLI's
// --ca-bundle, the controller's and the workers' GREENSHARD_CA_BUNDLE, a
// kubeconfig's CA (docs/controller.md "TLS"). In greenshard_spec (worker/spec/), the
// LibTorch-free library both the worker and the controller link.
#pragma once

#include <string>

namespace greenshard {

// Number of X.509 certificates in PEM text (0 when none parse).
int pem_certificate_count(const std::string& pem);

// Checks that `path` is a readable file holding at least one PEM
// certificate; throws std::runtime_error "<what>: cannot read '<path>'" or
// "<what>: '<path>' holds no PEM certificate". `what` names the flag or
// variable the path came from.
void check_ca_bundle(const std::string& path, const std::string& what);

}  // namespace greenshard
