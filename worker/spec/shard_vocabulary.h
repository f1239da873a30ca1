// shard's LibTorch-free vocabulary that the contract carries: the sharding
// strategies and their names (a job spec's sharding.strategy), object-store
// URLs (checkpoint.dir, the controller's S3 checkpoint settings) and the
// torchrun variables a gang is launched with (shard/rank_env.h). They stay
// in shard/, which depends on nothing of ours; the controller reaches them
// only through this header (scripts/check_controller_rooms.sh refuses any
// other include from shard/ or worker/).
#pragma once

#include "shard/object_store_url.h"
#include "shard/rank_env.h"
#include "shard/strategy_names.h"
