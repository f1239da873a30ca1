// The local executor: each rank of a gang a child process of the controller
// (executor_local.cpp), the worker's files under <data_dir>/jobs/<id>/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "controller/executors/executor.h"

namespace controller {

struct LocalExecutorOptions {
  std::string worker_path = "greenshard-worker";
  std::string data_dir;        // jobs live in <data_dir>/jobs/<id>/
  std::vector<std::string> extra_args;  // appended after --config job.json
};
std::unique_ptr<Executor> make_local_executor(const LocalExecutorOptions& options);

}  // namespace controller
