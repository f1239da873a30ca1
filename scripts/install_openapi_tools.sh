#!/usr/bin/env bash
# Installs the OpenAPI test tools into a project-local folder, from the npm
# registry only (nothing else is downloaded):
#
#   .tools/openapi/node_modules/@redocly/cli
#       the OpenAPI linter (`redocly lint`) that tests/openapi/ runs on the
#       document a real greenshard-controller serves at GET /v1/openapi.json;
#   .tools/openapi/node_modules/openapi-response-validator
#       validates each response of the e2e client (tests/openapi/validate.mjs)
#       against that same document: its status, and its body against the
#       schema of that status.
#
# Idempotent: re-running it with the pinned versions in place downloads nothing.
# Override the folder with GREENSHARD_TOOLS_DIR (default: <repo>/.tools); the
# tests honour the same variable.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_DIR=${GREENSHARD_TOOLS_DIR:-$PWD/.tools}
OPENAPI_DIR="$TOOLS_DIR/openapi"

# Exact versions. @redocly/cli 2.77.0 runs on Node >= 20.19 (20.x) or >= 22.12;
# openapi-response-validator 12.1.3 (ajv 8) on any Node >= 14.
OPENAPI_PKGS=(@redocly/cli@2.77.0 openapi-response-validator@12.1.3)

command -v node >/dev/null || { echo "install_openapi_tools: node is required (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install_openapi_tools: npm is required (apt-get install npm)" >&2; exit 1; }

source scripts/npm_pinned.sh
npm_pinned_install install_openapi_tools "$OPENAPI_DIR" "${OPENAPI_PKGS[@]}"
echo "install_openapi_tools: ok ($OPENAPI_DIR/node_modules)"
