// The built-in status page served at GET / (no token needed to load it): one
// self-contained HTML document (inline CSS and vanilla JS, nothing fetched
// from elsewhere) for one-machine use where no Grafana runs. In the browser
// it takes a bearer token from the URL fragment (/#token=...) or a small
// form, keeps it in sessionStorage, and polls GET /v1/jobs and GET
// /v1/regions with it: a jobs table (state, progress, loss, tokens/s,
// operational + embodied grams, region, placement saving) and, per region,
// an SVG chart of the 48 h intensity forecast with the placed jobs' windows
// shaded. Errors (401, network) are shown in the page.
//
// Stable hooks for tests and scripts:
//   body[data-status]               "no-token" | "loading" | "ok" | "error"
//   #error                          the last error's text (hidden when none)
//   #jobs tbody tr[data-job-id]     one row per job; td[data-field=...]
//   #regions figure[data-region]    one per region, holding
//     svg.forecast[data-region]     the chart;
//     rect.window[data-window-job]  a shaded window of that job
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace controller {

// The page (UTF-8 HTML).
const std::string& status_page_html();

// Response headers to send with it: a Content-Security-Policy allowing only
// inline script/style and same-origin fetches, no caching, no sniffing.
const std::vector<std::pair<std::string, std::string>>& status_page_headers();

}  // namespace controller
